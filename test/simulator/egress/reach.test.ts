import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { startSandboxApp } from "../../helpers/sandbox-app.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";

/**
 * From inside an isolated sandbox, the simulator's public surface answers by
 * the URLs users get outside (a preview of another sandbox, public and
 * private with its token; the control-plane API with a key), through the
 * egress gateway on the simulator's own address; the host's other loopback
 * services and the simulator's /_sim routes stay out of reach. Real
 * sandboxes (bwrap), real curl, Node and Python inside.
 */
type Sdk = typeof import("@blaxel/core");
type Sandbox = InstanceType<Sdk["SandboxInstance"]>;
const KEY = "egress-reach-admin-key";

/** A WebSocket client run inside a sandbox: one masked text frame to argv[2], prints the first frame back. */
const WS_CLIENT = String.raw`
const http = require("node:http");
const [url, text] = process.argv.slice(2);
const req = http.request(url, { headers: { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==" } });
req.on("upgrade", (res, socket) => {
  const mask = Buffer.from([1, 2, 3, 4]);
  socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | text.length]), mask, Buffer.from(text).map((b, i) => b ^ mask[i % 4])]));
  socket.once("data", (d) => { console.log(d.subarray(2, 2 + (d[1] & 0x7f)).toString()); process.exit(0); });
});
req.on("response", (res) => { console.log("no upgrade: " + res.statusCode); process.exit(1); });
req.end();
setTimeout(() => { console.log("timeout"); process.exit(1); }, 10000);
`;

describe.skipIf(isolationUnavailable !== undefined)("the simulator from inside a sandbox", () => {
  let sim: ServedSimulator;
  let sdk: Sdk;
  let a: Sandbox;
  let b: Sandbox;
  let hostService: Server;
  let publicUrl: string;
  let privateUrl: string;
  let privateToken: string;

  beforeAll(async () => {
    hostService = createServer((_q, s) => s.end("host-service"));
    await new Promise<void>((r) => hostService.listen(0, "127.0.0.1", r));
    sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: "egress", testHooks: true, logLevel: "silent" });
    sdk = await sdkForSimulator(sim.env);
    a = await sdk.SandboxInstance.create({ name: "echo-a" });
    b = await sdk.SandboxInstance.create({ name: "client-b" });
    const port = await startSandboxApp(a);
    const pub = await a.previews.create({ metadata: { name: "pub" }, spec: { port, public: true } });
    publicUrl = pub.spec.url!;
    const priv = await a.previews.create({ metadata: { name: "priv" }, spec: { port, public: false } });
    privateUrl = priv.spec.url!;
    privateToken = (await priv.tokens.create(new Date(Date.now() + 3_600_000))).value;
  }, 120_000);
  afterAll(async () => {
    await sim?.stop();
    hostService?.close();
  });

  const run = async (sandbox: Sandbox, command: string) => {
    const r = await sandbox.process.exec({ command, waitForCompletion: true, timeout: 30 });
    return { code: r.exitCode, out: r.logs ?? "" };
  };

  it("a sandbox without a proxy configuration has none of the proxy's variables, and trusts the simulator's CA", async () => {
    // On the platform only a sandbox with network.proxy has HTTP_PROXY, HTTPS_PROXY and NODE_EXTRA_CA_CERTS (the
    // SDK's proxy comparison test); https to the simulator's hosts still verifies through the bundle.
    const { out } = await run(b, "env");
    expect(out).not.toMatch(/^(HTTPS?_PROXY|https?_proxy|NODE_EXTRA_CA_CERTS)=/m);
    expect(out).toContain("SSL_CERT_FILE=/run/sandbox-agent/etc/ca-bundle.crt");
    expect(out).toContain("NODE_OPTIONS=--use-openssl-ca");
    const https = await run(
      b,
      `node -e "require('https').get('${publicUrl.replace("http:", "https:")}/echo/tls', r => { let d = ''; r.on('data', c => d += c); r.on('end', () => console.log(JSON.parse(d).url)) })"`,
    );
    expect(https.out.trim(), https.out).toBe("/echo/tls");
  });

  it("curl, Node and Python reach another sandbox's public preview by its URL", async () => {
    const curl = await run(b, `curl -sS --max-time 10 ${publicUrl}/echo/curl`);
    expect(curl.code, curl.out).toBe(0);
    expect(JSON.parse(curl.out)).toMatchObject({ method: "GET", url: "/echo/curl" });
    const node = await run(b, `node -e "fetch('${publicUrl}/echo/node').then(r => r.json()).then(j => console.log(j.url))"`);
    expect(node.out.trim()).toBe("/echo/node");
    const py = await run(b, `python3 -c "import urllib.request, json; print(json.load(urllib.request.urlopen('${publicUrl}/echo/py', timeout=10))['url'])"`);
    expect(py.out.trim()).toBe("/echo/py");
  });

  it("a chunked upload and a WebSocket reach the other sandbox through the simulator's handler", async () => {
    // Handed to the simulator in process (simulator/egress/in-process.ts): a body framed by chunks still arrives whole.
    await b.fs.write("/tmp/up.bin", "x".repeat(300_000));
    const up = await run(
      b,
      `curl -sS --max-time 10 -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/octet-stream' --data-binary @/tmp/up.bin ${publicUrl}/echo/up`,
    );
    expect(up.code, up.out).toBe(0);
    expect(JSON.parse(up.out)).toMatchObject({ method: "POST", url: "/echo/up", bytes: 300_000 });
    await b.fs.write("/tmp/ws.js", WS_CLIENT);
    const ws = await run(b, `node /tmp/ws.js ${publicUrl}/ws hello`);
    expect(ws.out.trim()).toBe("echo:hello");
  });

  it("a private preview answers with its token, 401 without", async () => {
    const without = await run(b, `curl -s -o /dev/null -w '%{http_code}' --max-time 10 ${privateUrl}/echo/x`);
    expect(without.out.trim()).toBe("401");
    const withToken = await run(b, `curl -sS --max-time 10 -H 'X-Blaxel-Preview-Token: ${privateToken}' ${privateUrl}/echo/tok`);
    expect(JSON.parse(withToken.out)).toMatchObject({ url: "/echo/tok" });
  });

  it("the control-plane API answers with a key given to the sandbox, and refuses without", async () => {
    const api = sim.env.BL_API_URL!;
    const withKey = await run(b, `curl -sS --max-time 10 -H 'Authorization: Bearer ${KEY}' -H 'X-Blaxel-Workspace: egress' ${api}/sandboxes`);
    expect(withKey.code, withKey.out).toBe(0);
    expect((JSON.parse(withKey.out) as { metadata: { name: string } }[]).map((s) => s.metadata.name).sort()).toEqual(["client-b", "echo-a"]);
    const without = await run(b, `curl -s -o /dev/null -w '%{http_code}' --max-time 10 ${api}/sandboxes`);
    expect(without.out.trim()).toBe("401");
    // A JSON body framed by chunks (no Content-Length) is read as a body by the API.
    const chunked = await run(
      b,
      `curl -sS --max-time 10 -H 'Authorization: Bearer ${KEY}' -H 'X-Blaxel-Workspace: egress' -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' -d '{"metadata":{"name":"chunked"},"spec":{"port":4000,"public":true}}' ${api}/sandboxes/echo-a/previews`,
    );
    expect(chunked.code, chunked.out).toBe(0);
    expect(JSON.parse(chunked.out)).toMatchObject({ metadata: { name: "chunked" }, spec: { port: 4000 } });
  });

  it("the host's other loopback services, /_sim and other agents stay unreachable", async () => {
    const hostPort = (hostService.address() as AddressInfo).port;
    const simPort = new URL(sim.url).port;
    // Direct (the sandbox's own loopback has nothing there) and through the proxy (refused by it).
    const direct = await run(b, `curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:${hostPort}/`);
    expect(direct.code).not.toBe(0);
    expect(direct.out).not.toContain("host-service");
    const proxied = await run(b, `curl -sS --proxy http://127.0.0.1:${simPort} --noproxy '' --max-time 5 http://127.0.0.1:${hostPort}/`);
    expect(proxied.out).not.toContain("host-service");
    expect(proxied.out).toContain("not reachable from a sandbox");
    const tunnel = await run(b, `curl -sS -p --proxy http://127.0.0.1:${simPort} --noproxy '' --max-time 5 http://localhost:${hostPort}/`);
    expect(tunnel.code).not.toBe(0);
    expect(tunnel.out).not.toContain("host-service");
    const simRoute = await run(b, `curl -s -w ' %{http_code}' --max-time 5 http://127.0.0.1:${simPort}/_sim/clock`);
    expect(simRoute.out.trim()).toMatch(/ 403$/);
    // Another sandbox's agent is a Unix socket in its own data dir, not in this sandbox's filesystem.
    const agents = await run(b, "ls /run/sandbox-agent; ls /run/sandbox-agent/../ 2>&1");
    expect(agents.out).not.toContain("echo-a");
  });
});
