import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EgressCa } from "../../../simulator/egress/ca.js";
import { parseNetwork, type EgressPolicy } from "../../../simulator/egress/policy.js";
import { EgressProxy } from "../../../simulator/egress/egress-proxy.js";
import { createLogger } from "../../../src/logging.js";
import { ECHO_SERVER, H1_CLIENT, H2_CLIENT } from "./proxy-clients.js";

/**
 * The egress proxy's front without sandboxes: the clients the SDK's proxy tests use, run as processes of this
 * host against an EgressProxy whose "simulator" is an echo server here — TLS to the proxy (HTTPS_PROXY is
 * https://), plain HTTP to it, https straight to a simulator's host on the proxy's port, HTTP/2 on an
 * intercepted tunnel, a name refused in the TLS handshake.
 */
describe("the egress proxy's TLS front", () => {
  const dir = mkdtempSync(join(tmpdir(), "egress-front-"));
  const ca = new EgressCa(undefined);
  let echo: Server;
  let echoPort: number;
  let front: TcpServer;
  let port: number;
  let policy: EgressPolicy | undefined;
  const proxy = new EgressProxy({
    ca,
    logger: createLogger({ level: "silent" }),
    policyOf: () => policy,
    isSimulator: (host) => host.endsWith(".localhost") || host === "127.0.0.1",
    simulatorAddress: () => ({ host: "127.0.0.1", port: echoPort }),
    outbound: false,
  });

  beforeAll(async () => {
    writeFileSync(join(dir, "ca.crt"), ca.certPem);
    for (const [name, text] of [
      ["echo.js", ECHO_SERVER],
      ["h1.js", H1_CLIENT],
      ["h2.js", H2_CLIENT],
    ])
      writeFileSync(join(dir, name!), text!);
    // The echo server as a module of this process: its request handler, on a port of its own.
    echo = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const raw = Buffer.concat(chunks).toString();
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ headers: req.headers, json: raw ? JSON.parse(raw) : null, path: req.url, method: req.method }));
      });
    });
    await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
    echoPort = (echo.address() as AddressInfo).port;
    front = createTcpServer((socket) => proxy.accept(socket, { workspace: "w", sandbox: "s" }));
    await new Promise<void>((r) => front.listen(0, "127.0.0.1", r));
    port = (front.address() as AddressInfo).port;
  });
  afterAll(() => {
    proxy.close();
    front?.close();
    echo?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const run = (client: string, args: string[], env: Record<string, string>) =>
    new Promise<{ code: number; out: string }>((resolve) => {
      const { HTTPS_PROXY: _a, https_proxy: _b, HTTP_PROXY: _c, http_proxy: _d, ...base } = process.env;
      execFile(process.execPath, [join(dir, client), ...args], { env: { ...base, NODE_EXTRA_CA_CERTS: join(dir, "ca.crt"), ...env } }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      );
    });
  const url = (path: string) => `https://echo.preview.localhost:${port}${path}`;

  it("serves CONNECT over TLS to the proxy (an https:// HTTPS_PROXY) and over plain HTTP alike, with injection", async () => {
    policy = parseNetwork({ proxy: { routing: [{ destinations: ["echo.preview.localhost"], headers: { "X-K": "{{SECRET:k}}" }, secrets: { k: "v1" } }] } });
    for (const scheme of ["https", "http"]) {
      const r = await run("h1.js", ["GET", url("/h"), '{"X-Mine":"{{SECRET:k}}"}'], { HTTPS_PROXY: `${scheme}://127.0.0.1:${port}` });
      expect(r.code, r.out).toBe(0);
      const got = JSON.parse(r.out) as { echo: { headers: Record<string, string> } };
      expect(got.echo.headers["x-k"]).toBe("v1");
      expect(got.echo.headers["x-mine"]).toBe("v1");
    }
  });

  it("serves https straight to a simulator's host on its port (no proxy variable): TLS for the name asked", async () => {
    policy = undefined;
    const r = await run("h1.js", ["POST", url("/p"), "{}", '{"a":1}'], { CONNECT_HOST: "127.0.0.1" });
    expect(r.code, r.out).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ status: 200, echo: { path: "/p", json: { a: 1 } } });
  });

  it("gives HTTP/2 on an intercepted tunnel to a client that offers it, injection included", async () => {
    policy = parseNetwork({ proxy: { routing: [{ destinations: ["*.localhost"], headers: { "X-K": "h2" }, body: { added: "yes" } }] } });
    const r = await run("h2.js", ["POST", url("/h2"), '{"X-Mine":"kept"}', '{"a":1}'], { HTTPS_PROXY: `https://127.0.0.1:${port}` });
    expect(r.code, r.out).toBe(0);
    const got = JSON.parse(r.out) as { alpn: string; status: number; echo: { headers: Record<string, string>; json: unknown } };
    expect(got.alpn).toBe("h2");
    expect(got.status).toBe(200);
    expect(got.echo.headers["x-k"]).toBe("h2");
    expect(got.echo.headers["x-mine"]).toBe("kept");
    expect(got.echo.json).toEqual({ a: 1, added: "yes" });
  });

  it("refuses in the TLS handshake a name the policy forbids, and any name when only the proxy is allowed", async () => {
    policy = parseNetwork({ forbiddenDomains: ["echo.preview.localhost"] });
    const forbidden = await run("h1.js", ["GET", url("/x"), "{}"], { CONNECT_HOST: "127.0.0.1" });
    expect(forbidden.code).not.toBe(0);
    expect(forbidden.out).toMatch(/DIRECT TLS/);
    policy = parseNetwork({ firewall: { rulesets: ["proxy"] } });
    const bypass = await run("h1.js", ["GET", url("/x"), "{}"], { CONNECT_HOST: "127.0.0.1" });
    expect(bypass.code).not.toBe(0);
    const viaProxy = await run("h1.js", ["GET", url("/x"), "{}"], { HTTPS_PROXY: `https://127.0.0.1:${port}` });
    expect(viaProxy.code, viaProxy.out).toBe(0);
  });
});
