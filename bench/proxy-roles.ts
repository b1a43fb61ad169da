/**
 * The two ends of bench:proxy's uploads, as plain Node processes without
 * dependencies, so they run inside an isolated sandbox as well as on the host:
 *   app <port>                      HTTP server on 127.0.0.1:<port>; answers each request with {bytes} of its body
 *   relay <port> <target port>      raw TCP relay on 127.0.0.1:<port> to 127.0.0.1:<target port>, no HTTP: the
 *                                   least a proxy that copies the bytes in user space can cost
 *   upload <url> <mib> [headers]    one PUT of <mib> MiB in 1 MiB writes, honouring backpressure;
 *                                   prints {"mbps": n, "cpuMs": n} (time and CPU from the request to the reply's end)
 */
import { createServer, request } from "node:http";
import { connect, createServer as createTcpServer } from "node:net";

const MiB = 1024 * 1024;

function serveApp(port: number): void {
  const server = createServer((req, res) => {
    let bytes = 0;
    req.on("data", (d: Buffer) => (bytes += d.length));
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ bytes })));
  });
  server.listen(port, "127.0.0.1");
}

function upload(url: string, mib: number, headers: Record<string, string>): Promise<number> {
  const chunk = Buffer.alloc(MiB, 5);
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "PUT", headers: { ...headers, "content-type": "application/octet-stream", "content-length": mib * MiB } }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => {
        if (res.statusCode !== 200 || (JSON.parse(text) as { bytes: number }).bytes !== mib * MiB)
          return reject(new Error(`PUT ${url}: ${res.statusCode} ${text.slice(0, 200)}`));
        resolve((mib * MiB) / 1e6 / ((performance.now() - start) / 1000));
      });
    });
    req.on("error", reject);
    let sent = 0;
    const more = () => {
      while (sent < mib) {
        sent++;
        if (!req.write(chunk)) return void req.once("drain", more);
      }
      req.end();
    };
    more();
  });
}

function serveRelay(port: number, target: number): void {
  createTcpServer((client) => {
    const upstream = connect(target, "127.0.0.1");
    client.pipe(upstream).pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  }).listen(port, "127.0.0.1");
}

const [role, ...args] = process.argv.slice(2);
if (role === "app") serveApp(Number(args[0]));
else if (role === "relay") serveRelay(Number(args[0]), Number(args[1]));
else if (role === "upload") {
  const before = process.cpuUsage();
  upload(args[0]!, Number(args[1]), JSON.parse(args[2] ?? "{}") as Record<string, string>).then(
    (mbps) => {
      const cpu = process.cpuUsage(before);
      process.stdout.write(`${JSON.stringify({ mbps, cpuMs: (cpu.user + cpu.system) / 1000 })}\n`);
    },
    (err: Error) => {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 1;
    },
  );
} else {
  process.stderr.write("usage: proxy-roles.js app <port> | relay <port> <target port> | upload <url> <mib> [headers-json]\n");
  process.exitCode = 2;
}
