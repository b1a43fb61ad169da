import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { DockerLauncher } from "../../../simulator/launcher/index.js";
import { openEgressListener } from "../../../simulator/launcher/docker-network.js";
import { ensureDockerDaemon, ensureLocalBaseImage } from "../../helpers/docker.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { startSandboxApp } from "../../helpers/sandbox-app.js";

/**
 * Docker sandboxes get the simulator's network as bwrap ones do: each
 * container on an internal network of its own, the simulator's address
 * relayed by its agent to the simulator's egress, the proxy's CA trusted, and
 * the default bridge attached only while no policy restricts destinations.
 * A real daemon and the local image (no registry here); the "outside" is a
 * container on the default bridge.
 */
type Sdk = typeof import("@blaxel/core");
type Sandbox = InstanceType<Sdk["SandboxInstance"]>;
const KEY = "docker-egress-admin-key";
const unavailable = await ensureDockerDaemon();

/** A CONNECT through HTTPS_PROXY, then https over it (as the SDK's tests do); prints the body, exits 1 on a refusal. */
const CONNECT_CLIENT = String.raw`
const http = require("node:http"), https = require("node:https");
const t = new URL(process.argv[2]), p = new URL(process.env.HTTPS_PROXY);
const connect = http.request({ host: p.hostname, port: p.port, method: "CONNECT", path: t.hostname + ":443" });
connect.on("connect", (res, socket) => {
  if (res.statusCode !== 200) { console.log("CONNECT " + res.statusCode); process.exit(1); }
  https.get({ socket, agent: false, servername: t.hostname, host: t.hostname, path: t.pathname }, (r) => {
    let d = ""; r.on("data", (c) => (d += c)); r.on("end", () => { console.log(d); process.exit(r.statusCode < 400 ? 0 : 1); });
  }).on("error", (e) => { console.log("REQ " + e.message); process.exit(1); });
});
connect.on("error", (e) => { console.log("PROXY " + e.message); process.exit(1); });
connect.end();
`;

/** GET argv[2] with Node, straight (no proxy); prints the body or the error's code. */
const DIRECT_GET = `fetch(process.argv[1], { signal: AbortSignal.timeout(4000) }).then((r) => r.text()).then(console.log, (e) => console.log("ERR " + (e.cause?.code ?? e.message)))`;

describe("a docker sandbox's egress listener", () => {
  it("hands over connections from the container's address only, and none before that address is known", async () => {
    const accepted: Socket[] = [];
    const listener = await openEgressListener("127.0.0.1", { listen: [], caPem: "", accept: (s) => accepted.push(s) });
    const tryOnce = () =>
      new Promise<boolean>((resolve) => {
        const socket = connect(listener.port, "127.0.0.1");
        socket.on("close", () => resolve(false)).on("error", () => undefined);
        socket.on("connect", () => setTimeout(() => resolve(!socket.destroyed && socket.readyState === "open"), 100));
      });
    try {
      expect(await tryOnce()).toBe(false);
      listener.allow("127.0.0.2"); // another container's address
      expect(await tryOnce()).toBe(false);
      expect(accepted).toHaveLength(0);
      listener.allow("127.0.0.1");
      expect(await tryOnce()).toBe(true);
      await new Promise((r) => setTimeout(r, 50));
      expect(accepted).toHaveLength(1);
    } finally {
      accepted.forEach((s) => s.destroy());
      listener.server.close();
    }
  });
});

describe.skipIf(unavailable !== undefined)(`docker sandboxes' network${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let sim: ServedSimulator;
  let sdk: Sdk;
  let b: Sandbox;
  let host: string;
  let hostService: Server;
  /** A host service on every address: reachable from a container through docker's bridge, not while its policy restricts (as root, iptables). */
  let hostAny: Server;
  let outside = "";
  let outsideUrl = "";

  beforeAll(async () => {
    const image = process.env.SANDBOX_KIT_DOCKER_TEST_IMAGE ?? (await ensureLocalBaseImage());
    outside = execFileSync(
      "docker",
      [
        "run",
        "--detach",
        "--rm",
        "--label",
        "sandbox-kit.test=docker-egress",
        image,
        "node",
        "-e",
        `require("http").createServer((q, s) => s.end("outside")).listen(8000)`,
      ],
      { encoding: "utf8" },
    ).trim();
    outsideUrl = `http://${execFileSync("docker", ["inspect", "--format", "{{.NetworkSettings.IPAddress}}", outside], { encoding: "utf8" }).trim()}:8000/`;
    hostService = createServer((_q, s) => s.end("host-service"));
    await new Promise<void>((r) => hostService.listen(0, "127.0.0.1", r));
    hostAny = createServer((_q, s) => s.end("host-any"));
    await new Promise<void>((r) => hostAny.listen(0, "0.0.0.0", r));
    sim = await serveSimulator(
      { port: 0, apiKey: KEY, workspace: "dockernet", logLevel: "silent", previewUrls: "host" },
      { launcher: new DockerLauncher({ image, readyTimeoutMs: 180_000 }) },
    );
    sdk = await sdkForSimulator(sim.env);
    const a = await sdk.SandboxInstance.create({ name: "echo-a", image });
    // A proxy configuration from the start: only such a sandbox has HTTPS_PROXY (as on the platform), which CONNECT_CLIENT uses.
    b = await sdk.SandboxInstance.create({ name: "client-b", image, network: { proxy: { routing: [{ destinations: ["unused.example.com"] }] } } });
    const port = await startSandboxApp(a);
    const preview = await a.previews.create({ metadata: { name: "pub" }, spec: { port, public: true } });
    host = new URL(preview.spec.url!).hostname;
    await b.fs.write("/tmp/connect.js", CONNECT_CLIENT);
  }, 1_200_000);
  afterAll(async () => {
    await sim?.stop();
    hostService?.close();
    hostAny?.close();
    if (outside) execFileSync("docker", ["rm", "--force", outside]);
  });

  const run = async (command: string) => {
    const r = await b.process.exec({ command, waitForCompletion: true, timeout: 30 });
    return { code: r.exitCode, out: (r.logs ?? "").trim() };
  };
  // The agent's filesystem API and commands share the container's one `/` (docs/launchers.md, docker).
  const viaProxy = (path: string) => run(`node /tmp/connect.js https://${host}${path}`);
  const direct = (url: string) => run(`node -e '${DIRECT_GET}' ${url}`);
  const setNetwork = (network: Record<string, unknown> | undefined) => sdk.SandboxInstance.updateNetwork("client-b", { network } as never);

  it("the proxy variables and trust are set; the API and another sandbox's preview answer by their URLs, over HTTPS with the simulator's CA", async () => {
    const env = await run("env");
    expect(env.out).toContain(`HTTPS_PROXY=https://127.0.0.1:${new URL(sim.url).port}`);
    expect(env.out).toContain("NODE_EXTRA_CA_CERTS=/run/sandbox-agent/etc/egress-ca.crt");
    const api = await run(
      `node -e 'fetch("${sim.env.BL_API_URL}/sandboxes", { headers: { authorization: "Bearer ${KEY}", "x-blaxel-workspace": "dockernet" } }).then((r) => r.json()).then((l) => console.log(l.map((s) => s.metadata.name).sort().join(",")))'`,
    );
    expect(api.out).toBe("client-b,echo-a");
    const node = await viaProxy("/echo/node");
    expect(node.code, node.out).toBe(0);
    expect(JSON.parse(node.out)).toMatchObject({ url: "/echo/node" });
    // Python's urllib with the system store alone (SSL_CERT_FILE unset): the container's store has the CA.
    const py = await run(
      `env -u SSL_CERT_FILE -u REQUESTS_CA_BUNDLE NO_PROXY= no_proxy= python3 -c "import urllib.request, json; print(json.load(urllib.request.urlopen('https://${host}/echo/py', timeout=10))['url'])"`,
    );
    expect(py.out, py.out).toBe("/echo/py");
    // The preview was made after this sandbox started: its name reached the container's /etc/hosts since, and
    // NO_PROXY (localhost) sends Python straight there, to the relay.
    let resolved = "";
    for (let i = 0; i < 50 && !resolved.startsWith("127.0.0.1"); i++) {
      resolved = (await run(`getent hosts ${host}`)).out;
      if (!resolved) await new Promise((r) => setTimeout(r, 100));
    }
    const plain = await run(
      `python3 -c "import urllib.request, json; print(json.load(urllib.request.urlopen('http://${host}:${new URL(sim.url).port}/echo/plain', timeout=10))['url'])"`,
    );
    expect(plain.out, plain.out).toBe("/echo/plain");
  });

  it("the host's loopback services stay unreachable, directly and through the proxy", async () => {
    const port = (hostService.address() as AddressInfo).port;
    const straight = await direct(`http://127.0.0.1:${port}/`);
    expect(straight.out).toMatch(/^ERR /);
    const proxied = await run(
      `node -e 'require("http").get({ host: "127.0.0.1", port: ${new URL(sim.url).port}, path: "http://127.0.0.1:${port}/" }, (r) => { let d = ""; r.on("data", (c) => (d += c)); r.on("end", () => console.log(r.statusCode, d)); })'`,
    );
    expect(proxied.out).toMatch(/^403 /);
    expect(proxied.out).not.toContain("host-service");
  });

  it("forbiddenDomains blocks the preview's host, live; with it, plain TCP out is refused while the proxy leads out; removal restores both", async () => {
    expect((await direct(outsideUrl)).out).toBe("outside");
    const hostAnyUrl = `http://172.17.0.1:${(hostAny.address() as AddressInfo).port}/`; // the default bridge's gateway: the host
    expect((await direct(hostAnyUrl)).out).toBe("host-any");
    await setNetwork({ forbiddenDomains: [host] });
    if (process.getuid?.() === 0) expect((await direct(hostAnyUrl)).out).toMatch(/^ERR /);
    const blocked = await viaProxy("/echo/x");
    expect(blocked.code).not.toBe(0);
    expect(blocked.out).toContain("CONNECT 403");
    expect((await direct(outsideUrl)).out).toMatch(/^ERR /);
    const proxied = await run(
      `node -e 'require("http").get({ host: "127.0.0.1", port: ${new URL(sim.url).port}, path: "${outsideUrl}" }, (r) => { let d = ""; r.on("data", (c) => (d += c)); r.on("end", () => console.log(d)); })'`,
    );
    expect(proxied.out).toBe("outside");
    await setNetwork(undefined);
    expect((await viaProxy("/echo/again")).code).toBe(0);
    expect((await direct(outsideUrl)).out).toBe("outside");
  });

  it("a job's task in a container calls the API by BL_API_URL with a key passed in", async () => {
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${sim.url}/v0${path}`, {
        method,
        headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": "dockernet", "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return (await res.json()) as Record<string, unknown>;
    };
    const script = `fetch("${sim.env.BL_API_URL}/sandboxes", { headers: { authorization: "Bearer " + process.env.KEY } }).then((r) => r.json()).then((l) => console.log("seen " + l.length))`;
    await call("POST", "/jobs", {
      metadata: { name: "caller" },
      spec: {
        runtime: {
          image: process.env.SANDBOX_KIT_DOCKER_TEST_IMAGE ?? (await ensureLocalBaseImage()),
          command: `node -e '${script}'`,
          envs: [{ name: "KEY", value: KEY }],
        },
      },
    });
    const { executionId } = await call("POST", "/jobs/caller/executions", { tasks: [{}] });
    let execution: { status?: string; tasks?: { result?: { stdout: string } }[] } = {};
    for (let i = 0; i < 1200 && !["succeeded", "failed", "cancelled", "timeout"].includes(execution.status ?? ""); i++) {
      await new Promise((r) => setTimeout(r, 100));
      execution = (await call("GET", `/jobs/caller/executions/${executionId as string}`)) as typeof execution;
    }
    expect(execution.status, JSON.stringify(execution)).toBe("succeeded");
    expect(execution.tasks![0]!.result!.stdout).toBe("seen 2\n");
  }, 120_000);

  it("leaves no container nor network behind once stopped", async () => {
    await sim.stop();
    const left = (kind: string[]) => execFileSync("docker", [...kind, "--quiet", "--filter", "label=sandbox-kit.sandbox"], { encoding: "utf8" });
    const ours = (ids: string) =>
      ids
        .split("\n")
        .filter(Boolean)
        .filter((id) => execFileSync("docker", ["inspect", "--format", "{{json .Config.Labels}}", id], { encoding: "utf8" }).includes("dockernet/"));
    expect(ours(left(["ps", "--all"]))).toEqual([]);
    expect(execFileSync("docker", ["network", "ls", "--format", "{{.Name}}"], { encoding: "utf8" })).not.toMatch(/sbx-dockernet-/);
  }, 120_000);
});
