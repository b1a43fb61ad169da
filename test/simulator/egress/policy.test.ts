import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { readdirSync, readFileSync } from "node:fs";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { createLogger } from "../../../src/logging.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { startSandboxApp } from "../../helpers/sandbox-app.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";

/**
 * A sandbox's spec.network applied by its egress proxy, with real sandboxes
 * and real clients inside: Node's https through HTTPS_PROXY with CONNECT (as
 * the SDK's own proxy tests do), curl and Python's urllib. The destination is
 * sandbox A's echo server behind a public host-form preview
 * (<label>.preview.localhost), reached over HTTPS through the proxy's
 * interception, which every sandbox trusts. Policies change live
 * (SandboxInstance.updateNetwork) on one running sandbox.
 */
type Sdk = typeof import("@blaxel/core");
type Sandbox = InstanceType<Sdk["SandboxInstance"]>;
const KEY = "egress-policy-admin-key";
const SECRET = "s3cret-value-never-shown-9f2c";
/** Pids of the slirp4netns processes this test process started (through the simulator it runs). */
const ourSlirps = () =>
  readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return (
          Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === process.pid && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("slirp4netns")
        );
      } catch {
        return false;
      }
    });

/** The host's own non-loopback address: the only "outside" this machine is sure to have. */
const hostAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

/** A CONNECT through HTTPS_PROXY, then https over it (as the SDK's tests do); prints the body, exits 1 on a refusal. */
const CONNECT_CLIENT = String.raw`
const http = require("node:http"), https = require("node:https");
const [method, target, body] = process.argv.slice(2);
const t = new URL(target), p = new URL(process.env.HTTPS_PROXY);
const connect = http.request({ host: p.hostname, port: p.port, method: "CONNECT", path: t.hostname + ":443" });
connect.on("connect", (res, socket) => {
  if (res.statusCode !== 200) { process.stderr.write("CONNECT " + res.statusCode + "\n"); process.exit(1); }
  const headers = body ? { "content-type": "application/json", "content-length": Buffer.byteLength(body) } : {};
  const req = https.request({ socket, agent: false, servername: t.hostname, host: t.hostname, method, path: t.pathname + t.search, headers }, (r) => {
    let d = ""; r.on("data", (c) => (d += c)); r.on("end", () => { process.stdout.write(d); process.exit(r.statusCode < 400 ? 0 : 1); });
  });
  req.on("error", (e) => { process.stderr.write("REQ " + e.message + "\n"); process.exit(1); });
  req.end(body);
});
connect.on("error", (e) => { process.stderr.write("PROXY " + e.message + "\n"); process.exit(1); });
connect.end();
`;

describe.skipIf(isolationUnavailable !== undefined)("a sandbox's network policy, applied live", () => {
  let sim: ServedSimulator;
  let sdk: Sdk;
  let a: Sandbox;
  let b: Sandbox;
  let host: string;
  let appPort: number;
  let logs = "";

  beforeAll(async () => {
    const destination = new Writable({ write: (chunk, _e, cb) => ((logs += String(chunk)), cb()) });
    const logger = createLogger({ level: "debug", destination });
    sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: "policy", previewUrls: "host", logLevel: "debug" }, { logger });
    sdk = await sdkForSimulator(sim.env);
    a = await sdk.SandboxInstance.create({ name: "echo-a" });
    // A proxy configuration from the start: only such a sandbox has HTTPS_PROXY (read at its start), which these clients use.
    b = await sdk.SandboxInstance.create({ name: "client-b", network: { proxy: { routing: [{ destinations: ["unused.example.com"] }] } } });
    appPort = await startSandboxApp(a);
    const preview = await a.previews.create({ metadata: { name: "pub" }, spec: { port: appPort, public: true } });
    host = new URL(preview.spec.url!).hostname;
    await b.fs.write("/tmp/connect.js", CONNECT_CLIENT);
  }, 120_000);
  afterAll(async () => {
    await sim?.stop();
  });

  const run = async (command: string) => {
    const r = await b.process.exec({ command, waitForCompletion: true, timeout: 30 });
    return { code: r.exitCode, out: r.logs ?? "" };
  };
  // *.localhost is always bypassed (NO_PROXY has localhost): these clients are sent to the proxy by clearing it.
  const viaProxy = "env NO_PROXY= no_proxy=";
  const node = (path: string, method = "GET", body?: string) => run(`node /tmp/connect.js ${method} https://${host}${path}${body ? ` '${body}'` : ""}`);
  const curl = (path: string) => run(`${viaProxy} curl -sS --max-time 10 https://${host}${path}`);
  const plainCurl = (path: string) => run(`${viaProxy} curl -sS --max-time 10 http://${host}:${new URL(sim.url).port}${path}`);
  const python = (path: string) =>
    run(`${viaProxy} python3 -c "import urllib.request, json; print(json.load(urllib.request.urlopen('https://${host}${path}', timeout=10))['url'])"`);
  const setNetwork = (network: Record<string, unknown> | undefined) => sdk.SandboxInstance.updateNetwork("client-b", { network } as never);

  it("without a restriction: Node (CONNECT), curl and Python reach the preview over HTTPS, trusting the simulator's CA", async () => {
    const n = await node("/echo/node");
    expect(n.code, n.out).toBe(0);
    expect(JSON.parse(n.out)).toMatchObject({ url: "/echo/node" });
    const c = await curl("/echo/curl");
    expect(c.code, c.out).toBe(0);
    expect(JSON.parse(c.out)).toMatchObject({ url: "/echo/curl" });
    const p = await python("/echo/py");
    expect(p.out.trim()).toBe("/echo/py");
  });

  it("a host-form preview's name resolves inside, also for a preview made after the sandbox started (NO_PROXY sends it there directly)", async () => {
    const late = await a.previews.create({ metadata: { name: "late" }, spec: { port: appPort, public: true } });
    const lateHost = new URL(late.spec.url!).hostname;
    let resolved = "";
    for (let i = 0; i < 50 && !resolved.startsWith("127.0.0.1"); i++) {
      resolved = (await run(`getent hosts ${lateHost}`)).out;
      if (!resolved) await new Promise((r) => setTimeout(r, 100));
    }
    expect(resolved).toMatch(/^127\.0\.0\.1\s/);
    // Python's urllib with the sandbox's own environment: *.localhost bypasses the proxy, glibc resolves it from /etc/hosts.
    const py = await run(`python3 -c "import urllib.request, json; print(json.load(urllib.request.urlopen('${late.spec.url}/echo/late', timeout=10))['url'])"`);
    expect(py.out.trim(), py.out).toBe("/echo/late");
  });

  it("forbiddenDomains blocks the host for every client; the refusal names the rule", async () => {
    await setNetwork({ forbiddenDomains: [host] });
    const n = await node("/echo/x");
    expect(n.code).not.toBe(0);
    expect(n.out).toContain("CONNECT 403");
    expect((await curl("/echo/x")).code).not.toBe(0);
    expect((await python("/echo/x")).code).not.toBe(0);
    const plain = await plainCurl("/echo/x");
    expect(plain.out).toContain("forbiddenDomains");
    expect(plain.out).toContain(host);
  });

  it("allowedDomains naming another host blocks it; a wildcard allows it, and wins over forbiddenDomains", async () => {
    await setNetwork({ proxy: { allowedDomains: ["other.example.com"] } });
    expect((await node("/echo/x")).code).not.toBe(0);
    expect((await plainCurl("/echo/x")).out).toContain("allowedDomains");
    await setNetwork({ allowedDomains: ["*.preview.localhost"], forbiddenDomains: [host] });
    const n = await node("/echo/wild");
    expect(n.code, n.out).toBe(0);
    expect(JSON.parse(n.out)).toMatchObject({ url: "/echo/wild" });
  });

  it("removing the policy makes the host reachable again, without a restart (files and processes kept)", async () => {
    await b.process.exec({ name: "keeper", command: "sleep 600" });
    await b.fs.write("/tmp/kept.txt", "kept");
    await setNetwork({ forbiddenDomains: [host] });
    expect((await node("/echo/x")).code).not.toBe(0);
    await setNetwork(undefined);
    const n = await node("/echo/again");
    expect(n.code, n.out).toBe(0);
    expect(await b.fs.read("/tmp/kept.txt")).toBe("kept");
    expect((await b.process.get("keeper")).status).toBe("running");
  });

  it("a routing rule injects a secret header and body field; the secret is never returned nor logged, and survives a read-modify-write", async () => {
    await setNetwork({
      proxy: {
        routing: [{ destinations: [host], headers: { "X-Api-Key": "{{SECRET:key}}" }, body: { injected: "k={{SECRET:key}}" }, secrets: { key: SECRET } }],
      },
    });
    const n = await node("/echo/h");
    expect(n.code, n.out).toBe(0);
    expect(JSON.parse(n.out).headers["x-api-key"]).toBe(SECRET);
    const posted = await node("/echo/b", "POST", '{"a":1}');
    expect(JSON.parse(posted.out).bytes).toBe(JSON.stringify({ a: 1, injected: `k=${SECRET}` }).length);
    // Another rule's destinations do not get it.
    const got = await sdk.SandboxInstance.get("client-b");
    expect(JSON.stringify(got.spec)).not.toContain(SECRET);
    // As on the platform, a GET leaves the rules' secrets out (not "***").
    expect(got.spec.network?.proxy?.routing?.[0]?.secrets).toBeUndefined();
    // A read-modify-write (the SDK's updateNetwork sends the spec back, rules without secrets) keeps the stored secret.
    await setNetwork({ ...got.spec.network, allowedDomains: ["*.localhost"] });
    const again = await node("/echo/h2");
    expect(JSON.parse(again.out).headers["x-api-key"]).toBe(SECRET);
    const list = await fetch(`${sim.env.BL_API_URL}/sandboxes`, { headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": "policy" } });
    expect(await list.text()).not.toContain(SECRET);
    expect(logs).not.toContain(SECRET);
    expect(logs).toContain("egress blocked by the sandbox's network policy");
  });

  it.skipIf(!hostAddress)(
    "with a restricting policy, plain TCP (not through the proxy) is refused; the proxy still leads out; removal restores it",
    async () => {
      const outside: Server = createServer((_q, s) => s.end("outside"));
      await new Promise<void>((r) => outside.listen(0, "0.0.0.0", r));
      const url = `http://${hostAddress}:${(outside.address() as AddressInfo).port}/`;
      try {
        const direct = () => run(`curl -sS --noproxy '*' --max-time 5 ${url}`);
        await setNetwork(undefined);
        expect((await direct()).out).toBe("outside");
        const before = ourSlirps();
        await setNetwork({ forbiddenDomains: ["blocked.example.com"] });
        // Its slirp4netns is gone (by pid), not left behind.
        expect(ourSlirps().length).toBe(before.length - 1);
        const cut = await direct();
        expect(cut.code).not.toBe(0);
        expect(cut.out).not.toContain("outside");
        const proxied = await run(`curl -sS --max-time 5 --proxy "$HTTP_PROXY" --noproxy '' ${url}`);
        expect(proxied.out).toBe("outside");
        await setNetwork(undefined);
        expect((await direct()).out).toBe("outside");
        expect(ourSlirps().length).toBe(before.length);
      } finally {
        outside.close();
      }
    },
  );

  it("bad input: a malformed pattern, an unknown secret, a huge list are 400 naming the field, nothing applied", async () => {
    await setNetwork({ forbiddenDomains: ["other.example.com"] });
    const put = (network: unknown) =>
      fetch(`${sim.env.BL_API_URL}/sandboxes/client-b`, {
        method: "PUT",
        headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": "policy", "content-type": "application/json" },
        body: JSON.stringify({ metadata: { name: "client-b" }, spec: { network } }),
      });
    const cases: [unknown, string][] = [
      [{ forbiddenDomains: ["exa mple.com"] }, "spec.network.forbiddenDomains[0]"],
      [{ proxy: { allowedDomains: ["*.*.example.com"] } }, "spec.network.proxy.allowedDomains[0]"],
      [
        { proxy: { routing: [{ destinations: ["*"], headers: { "X-K": "{{SECRET:missing}}" }, secrets: { key: "v" } }] } },
        "spec.network.proxy.routing[0].headers.X-K",
      ],
      [{ forbiddenDomains: Array.from({ length: 5_000 }, (_, i) => `d${i}.example.com`) }, "spec.network.forbiddenDomains"],
    ];
    for (const [network, field] of cases) {
      const res = await put(network);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toContain(field);
    }
    const got = await sdk.SandboxInstance.get("client-b");
    expect(got.spec.network).toEqual({ forbiddenDomains: ["other.example.com"] });
  });
});
