/**
 * A small app to run INSIDE a sandbox (written with fs.write, started with
 * process.exec), whatever the launcher isolates: it listens on a free port,
 * writes the port to `port.txt` beside itself, answers /echo with what it
 * received, /upload with the body's size, and echoes WebSocket text frames.
 */
export const SANDBOX_APP = String.raw`
const http = require("node:http");
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");
const server = http.createServer((req, res) => {
  let bytes = 0;
  req.on("data", (d) => (bytes += d.length));
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json", "x-app": "in-sandbox", "access-control-allow-origin": "https://app.example" });
    res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, bytes }));
  });
});
server.on("upgrade", (req, socket) => {
  const accept = crypto.createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
  socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n");
  socket.on("data", (d) => {
    const len = d[1] & 0x7f, mask = d.subarray(2, 6);
    const text = "echo:" + Buffer.from(d.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4])).toString();
    socket.write(Buffer.concat([Buffer.from([0x81, text.length]), Buffer.from(text)]));
  });
  socket.on("error", () => socket.destroy());
});
server.listen(0, "127.0.0.1", () => fs.writeFileSync(path.join(__dirname, "port.txt"), String(server.address().port)));
`;

/** Starts SANDBOX_APP in a sandbox (the SDK's instance) at /app and resolves with the port it listens on. */
export async function startSandboxApp(sandbox: {
  fs: { write(path: string, content: string): Promise<unknown>; read(path: string): Promise<string> };
  process: { exec(request: { name: string; command: string; workingDir: string }): Promise<unknown> };
}): Promise<number> {
  await sandbox.fs.write("/app/server.js", SANDBOX_APP);
  await sandbox.process.exec({ name: "app", command: "node server.js", workingDir: "/app" });
  for (let tries = 0; tries < 400; tries++) {
    const port = Number(await sandbox.fs.read("/app/port.txt").catch(() => "0"));
    if (port) return port;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("the sandbox's app did not write its port in 20 s");
}
