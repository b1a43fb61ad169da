import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { createServer, type AddressInfo } from "node:net";
import { createServer as createHttpServer } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { SwarmLauncher } from "../../../simulator/launcher/index.js";
import { isAlive } from "../../../simulator/launcher/proc.js";
import { ownerLabel } from "../../../simulator/launcher/swarm.js";
import { ensureDockerDaemon, ensureLocalBaseImage, filesImages, removeFilesImagesSince, tinyImage } from "../../helpers/docker.js";
import { startSandboxApp } from "../../helpers/sandbox-app.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { spawnSimulatorProcess } from "../../helpers/simulator.js";
import { exec, eventually, specFor, tempBase } from "./helpers.js";

/**
 * The swarm launcher on a single-node swarm this file starts (`docker swarm init --advertise-addr 127.0.0.1`,
 * left afterwards; one already active is used and left alone), through the SDK: create, files, a command,
 * /port/n, a preview, delete — and no service outlives delete, the simulator's stop, or its kill -9 (the next
 * start reaps it, keeping the files of the sandboxes it brings back); the sandbox network (the simulator's URLs
 * from inside, the proxy's routing and secret injection, a policy cutting direct outbound live); standby with a
 * request across it; --swarm-registry with Debian's docker-registry; then a second engine in a container as a
 * worker node. Argv, task and owner logic: swarm-args.test.ts.
 */
const docker = (...args: string[]) => execFileSync("docker", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
const servicesOf = (label: string) => docker("service", "ls", "--quiet", "--filter", `label=${label}`).split("\n").filter(Boolean);

/** Undefined once this daemon is a swarm manager (initialised here when it was in no swarm), else why the swarm tests skip. */
async function ensureSwarm(): Promise<{ unavailable?: string; initialised: boolean }> {
  const daemon = await ensureDockerDaemon();
  if (daemon) return { unavailable: daemon, initialised: false };
  const state = docker("info", "--format", "{{.Swarm.LocalNodeState}}");
  if (state === "active") return { initialised: false };
  try {
    docker("swarm", "init", "--advertise-addr", "127.0.0.1");
    return { initialised: true };
  } catch (err) {
    return { unavailable: `docker swarm init failed: ${(err as { stderr?: string }).stderr?.trim() ?? (err as Error).message}`, initialised: false };
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

const swarm = await ensureSwarm();
const filesBefore = filesImages();
if (swarm.unavailable) console.warn(`swarm launcher tests skipped: ${swarm.unavailable}`);
const WS = "swarmws";
const hasRegistry = (() => {
  try {
    execFileSync("sh", ["-c", "command -v docker-registry && command -v curl"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();
const KEY = "swarm-launcher-key-01";

/** A CONNECT through HTTPS_PROXY, then https over it; prints the body, exits 1 on a refusal (as docker-egress.test.ts). */
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
/** GET argv[1] with Node, straight (no proxy); prints the body or the error's code. */
const DIRECT_GET = `fetch(process.argv[1], { signal: AbortSignal.timeout(4000) }).then((r) => r.text()).then(console.log, (e) => console.log("ERR " + (e.cause?.code ?? e.message)))`;

describe.skipIf(swarm.unavailable !== undefined)(`swarm launcher on a single-node swarm${swarm.unavailable ? ` (skipped: ${swarm.unavailable})` : ""}`, () => {
  let image = "";
  let sim: ServedSimulator | undefined;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    image = process.env.SANDBOX_KIT_DOCKER_TEST_IMAGE ?? (await ensureLocalBaseImage());
  }, 1_200_000);
  afterAll(async () => {
    await sim?.stop();
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    // Whatever a failed test left, then the swarm this file made.
    for (const id of servicesOf("sandbox-kit.kind=swarm-sandbox").filter(
      (id) => docker("service", "inspect", "--format", '{{index .Spec.Labels "sandbox-kit.workspace"}}', id) === WS,
    ))
      docker("service", "rm", id);
    removeFilesImagesSince(filesBefore);
    if (swarm.initialised) docker("swarm", "leave", "--force");
  }, 120_000);

  it("the SDK creates a sandbox as a service, writes, reads, runs, serves /port/n and a preview, and delete removes the service", async () => {
    sim = await serveSimulator(
      { port: 0, apiKey: KEY, workspace: WS, logLevel: "silent" },
      { launcher: new SwarmLauncher({ image, readyTimeoutMs: 180_000, pollMs: 250 }) },
    );
    const health = (await (await fetch(`${sim.url}/health`)).json()) as { sandboxes: { launcher: string; detail: string } };
    expect(health.sandboxes).toMatchObject({ launcher: "swarm" });
    expect(health.sandboxes.detail).toMatch(/no --swarm-registry: images stay/);
    const sdk = await sdkForSimulator(sim.env);
    const box = await sdk.SandboxInstance.create({ name: "on-swarm", image, memory: 1024 } as never);
    const [service] = servicesOf(`sandbox-kit.sandbox=on-swarm`);
    expect(service).toBeTruthy();
    expect(
      docker("service", "inspect", "--format", "{{.Spec.TaskTemplate.Resources.Limits.MemoryBytes}} {{.Spec.TaskTemplate.RestartPolicy.Condition}}", service!),
    ).toBe(`${1024 * 1024 * 1024} none`);
    await box.fs.write("/notes/hello.txt", "from the SDK");
    expect(await box.fs.read("/notes/hello.txt")).toBe("from the SDK");
    // One `/` for the file API and commands, as on the platform: a program written through the SDK, then run.
    await box.fs.write("/tmp/sw.sh", "#!/bin/sh\ncat /notes/hello.txt; hostname\n");
    const ran = await box.process.exec({ command: "sh /tmp/sw.sh", waitForCompletion: true } as never);
    expect(ran.exitCode).toBe(0);
    expect(ran.stdout).toContain("from the SDK");
    expect(ran.stdout).toContain("on-swarm");
    const port = await startSandboxApp(box as never);
    const direct = await fetch(`${box.metadata!.url}/port/${port}/via-port`, { headers: { "x-blaxel-authorization": `Bearer ${KEY}` } });
    expect(((await direct.json()) as { url: string }).url).toBe("/via-port");
    const preview = await box.previews.create({ metadata: { name: "site" }, spec: { port, public: true } });
    const viewed = await fetch(`${preview.spec!.url}/page`);
    expect(viewed.status).toBe(200);
    expect(((await viewed.json()) as { url: string }).url).toBe("/page");
    await sdk.SandboxInstance.delete("on-swarm");
    await eventually(() => servicesOf(`sandbox-kit.sandbox=on-swarm`).length === 0, 30_000);
  }, 300_000);

  it("a restart for new envs replaces the service; archive removes it, unarchive makes a new one", async () => {
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${sim!.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const created = await call("POST", "/v0/sandboxes", { metadata: { name: "moves" }, spec: { runtime: { image, envs: [{ name: "A", value: "1" }] } } });
    expect(created.status).toBe(200);
    const [first] = servicesOf("sandbox-kit.sandbox=moves");
    const spec = { ...created.body.spec, runtime: { ...created.body.spec.runtime, envs: [{ name: "A", value: "2" }] } };
    expect((await call("PUT", "/v0/sandboxes/moves", { spec })).body.status).toBe("DEPLOYED");
    const after = servicesOf("sandbox-kit.sandbox=moves");
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(first);
    expect((await call("POST", `/sbx/${WS}/moves/process`, { command: "echo $A > /root-file; echo $A", waitForCompletion: true })).body.stdout).toBe("2\n");
    expect((await call("POST", "/v0/sandboxes/moves/archive")).body.status).toBe("ARCHIVED");
    expect(servicesOf("sandbox-kit.sandbox=moves")).toHaveLength(0);
    expect((await call("POST", "/v0/sandboxes/moves/unarchive")).body.status).toBe("DEPLOYED");
    expect(servicesOf("sandbox-kit.sandbox=moves")).toHaveLength(1);
    // Its files came back with it: the task's layer was committed by its node's engine (docker-files.ts).
    expect((await call("POST", `/sbx/${WS}/moves/process`, { command: "cat /root-file", waitForCompletion: true })).body.stdout).toBe("2\n");
    expect((await call("DELETE", "/v0/sandboxes/moves")).status).toBe(200); // answers DELETING; the agent stops after
    await eventually(() => servicesOf("sandbox-kit.sandbox=moves").length === 0, 30_000);
  }, 300_000);

  it("sandboxes of one workspace reach each other on its overlay; another workspace's reach neither of its addresses", async () => {
    const launcher = new SwarmLauncher({ image, readyTimeoutMs: 120_000, pollMs: 250 });
    const base = tempBase("swarm-apart-");
    const specs = [
      { ...specFor(base, "server"), workspace: WS },
      { ...specFor(base, "neighbour"), workspace: WS },
      { ...specFor(base, "stranger"), workspace: `${WS}-other` },
    ];
    const [server, neighbour, stranger] = await Promise.all(specs.map((spec) => launcher.start(spec)));
    try {
      await exec(server!.url, specs[0]!.token, `node -e 'require("net").createServer((c) => c.end("hello")).listen(3000, "0.0.0.0")' > /dev/null 2>&1 &`);
      const interfaces = JSON.parse(
        (await exec(server!.url, specs[0]!.token, `node -e 'console.log(JSON.stringify(require("os").networkInterfaces()))'`)).stdout,
      ) as Record<string, { family: string; address: string; internal: boolean }[]>;
      const addresses = Object.values(interfaces)
        .flat()
        .filter((a) => a.family === "IPv4" && !a.internal)
        .map((a) => a.address);
      expect(addresses.length).toBeGreaterThanOrEqual(2); // the workspace's overlay, and docker_gwbridge for egress
      const probe = (ip: string) =>
        `node -e 'const s = require("net").connect(3000, "${ip}"); s.on("data", (d) => { console.log(String(d)); process.exit(0); }); s.on("error", (e) => { console.log(e.code); process.exit(0); }); setTimeout(() => { console.log("timeout"); process.exit(0); }, 2000)'`;
      const overlay = addresses.find((ip) => ip.startsWith("10."))!;
      expect(overlay).toBeTruthy();
      for (let tries = 0; (await exec(server!.url, specs[0]!.token, probe("127.0.0.1"))).stdout.trim() !== "hello"; tries++) {
        if (tries > 50) throw new Error("the server in the sandbox did not start");
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await exec(neighbour!.url, specs[1]!.token, probe(overlay))).stdout.trim()).toBe("hello");
      for (const ip of addresses) expect((await exec(stranger!.url, specs[2]!.token, probe(ip))).stdout.trim()).not.toBe("hello");
    } finally {
      await Promise.all([server, neighbour, stranger].map((h) => h!.stop(1_000)));
      await launcher.close();
    }
  }, 180_000);

  it("a constraint no node meets fails the start with the swarm's reason, and leaves no service", async () => {
    const launcher = new SwarmLauncher({ image, constraints: ["node.labels.pool==nowhere"], readyTimeoutMs: 4_000, pollMs: 250 });
    const spec = { ...specFor(tempBase("swarm-unplaced-"), "unplaced"), workspace: WS };
    await expect(launcher.start(spec)).rejects.toThrow(/was not running in time: task pending: no suitable node/);
    expect(servicesOf(`sandbox-kit.data-dir=${spec.dataDir}`)).toHaveLength(0);
    await launcher.close();
  }, 60_000);

  it("the simulator's stop removes its sandboxes' services", async () => {
    const sdk = await sdkForSimulator(sim!.env);
    await sdk.SandboxInstance.create({ name: "until-stop", image } as never);
    expect(servicesOf("sandbox-kit.sandbox=until-stop")).toHaveLength(1);
    await sim!.stop();
    sim = undefined;
    expect(servicesOf("sandbox-kit.sandbox=until-stop")).toHaveLength(0);
  }, 300_000);

  it("after kill -9 of the simulator, its next start keeps the records and the services consistent: its sandboxes come back with their files, services without a record go", async () => {
    const data = join(tempBase("swarm-kill-"), "sim.db");
    const args = ["--api-key", KEY, "--workspace", WS, "--data", data, "--launcher", "swarm", "--log-level", "warn"];
    const first = await spawnSimulatorProcess(args, { track: children });
    const api = (url: string, method: string, path: string, body?: unknown) =>
      fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
    expect((await api(first.url, "POST", "/v0/sandboxes", { metadata: { name: "orphan" }, spec: { runtime: { image } } })).status).toBe(200);
    await api(first.url, "POST", `/sbx/${WS}/orphan/process`, { command: "echo kept > /kept.txt", waitForCompletion: true });
    const [before] = servicesOf("sandbox-kit.sandbox=orphan");
    expect(before).toBeTruthy();
    // A service of that simulator whose sandbox has no record (its delete never finished).
    const stray = docker(
      "service",
      "create",
      "--detach",
      "--quiet",
      "--no-resolve-image",
      "--restart-condition",
      "none",
      "--name",
      `stray-${process.pid}`,
      "--label",
      "sandbox-kit.kind=swarm-sandbox",
      "--label",
      `sandbox-kit.owner=${ownerLabel(first.child.pid!)}`,
      "--label",
      `sandbox-kit.workspace=${WS}`,
      "--label",
      `sandbox-kit.data-dir=${tempBase("swarm-stray-")}`,
      image,
      "sleep",
      "600",
    );
    const killed = new Promise((resolve) => first.child.once("exit", resolve));
    first.child.kill("SIGKILL");
    await killed;
    expect(servicesOf("sandbox-kit.sandbox=orphan")).toEqual([before]); // nothing can remove it while no simulator runs
    // The next simulator on the same data: the stray service is removed, the sandbox gets a service of its own
    // again, DEPLOYED, with the file written before the kill (the reaped task's layer was kept).
    const second = await spawnSimulatorProcess(args, { track: children });
    for (let tries = 0; (await api(second.url, "GET", "/v0/sandboxes/orphan")).body.status !== "DEPLOYED"; tries++) {
      if (tries > 600) throw new Error("the sandbox did not come back DEPLOYED");
      await new Promise((r) => setTimeout(r, 200));
    }
    const after = servicesOf("sandbox-kit.sandbox=orphan");
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(before);
    expect(docker("service", "ls", "--quiet", "--filter", `name=stray-${process.pid}`)).toBe("");
    expect(servicesOf("sandbox-kit.kind=swarm-sandbox")).not.toContain(stray);
    expect((await api(second.url, "POST", `/sbx/${WS}/orphan/process`, { command: "cat /kept.txt", waitForCompletion: true })).body.stdout).toBe("kept\n");
    // Another simulator with other state, after this one is killed too, removes what it left (no record of its own).
    const killedAgain = new Promise((resolve) => second.child.once("exit", resolve));
    second.child.kill("SIGKILL");
    await killedAgain;
    const fresh = ["--api-key", KEY, "--workspace", WS, "--data", join(tempBase("swarm-next-"), "sim.db"), "--launcher", "swarm", "--log-level", "warn"];
    const third = await spawnSimulatorProcess(fresh, { track: children });
    await eventually(() => servicesOf("sandbox-kit.sandbox=orphan").length === 0, 60_000);
    const exited = new Promise((resolve) => third.child.once("exit", resolve));
    third.child.kill("SIGTERM");
    await exited;
  }, 400_000);

  it("services of this simulator it no longer tracks (a removal lost while the manager was away) are swept", async () => {
    const launcher = new SwarmLauncher({ image, readyTimeoutMs: 60_000, pollMs: 250 });
    const spec = { ...specFor(tempBase("swarm-sweep-"), "tracked"), workspace: WS };
    const agent = await launcher.start(spec);
    const untracked = docker(
      "service",
      "create",
      "--detach",
      "--quiet",
      "--no-resolve-image",
      "--restart-condition",
      "none",
      "--name",
      `untracked-${process.pid}`,
      "--label",
      "sandbox-kit.kind=swarm-sandbox",
      "--label",
      `sandbox-kit.owner=${ownerLabel()}`,
      image,
      "sleep",
      "600",
    );
    try {
      expect(await launcher.sweep()).toEqual([`untracked-${process.pid}`]);
      expect(docker("service", "ls", "--quiet", "--filter", `name=untracked-${process.pid}`)).toBe("");
      expect(servicesOf(`sandbox-kit.data-dir=${spec.dataDir}`)).toHaveLength(1); // the live one stays
    } finally {
      await agent.stop(1_000);
      await launcher.close();
      if (docker("service", "ls", "--quiet", "--filter", `id=${untracked}`)) docker("service", "rm", untracked);
    }
  }, 120_000);

  it("the sandbox network: the simulator's URLs from inside, the proxy's routing with secret injection, a policy cutting direct outbound live; the tunnels after the agent's upgrade", async () => {
    const hostAny = createHttpServer((_q, r) => r.end("host-any"));
    await new Promise<void>((r) => hostAny.listen(0, "0.0.0.0", r));
    const gateway = docker("network", "inspect", "docker_gwbridge", "--format", "{{(index .IPAM.Config 0).Gateway}}");
    const hostAnyUrl = `http://${gateway}:${(hostAny.address() as AddressInfo).port}/`;
    const net = await serveSimulator(
      { port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", previewUrls: "host" },
      { launcher: new SwarmLauncher({ image, readyTimeoutMs: 180_000, pollMs: 250 }) },
    );
    // The SDK keeps the first simulator's control-plane URL for the process: this one is called over HTTP, its
    // sandboxes through SDK instances of what it returned (their own URLs).
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${net.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
    try {
      const { SandboxInstance } = await sdkForSimulator(net.env);
      const a = new SandboxInstance((await call("POST", "/v0/sandboxes", { metadata: { name: "net-a" }, spec: { runtime: { image } } })).body);
      const port = await startSandboxApp(a as never);
      const preview = await call("POST", "/v0/sandboxes/net-a/previews", { metadata: { name: "pub" }, spec: { port, public: true } });
      const host = new URL(preview.body.spec.url).hostname;
      const routing = [{ destinations: [host], headers: { "X-Injected": "{{SECRET:k}}" }, secrets: { k: "swarm-secret-1" } }];
      const created = await call("POST", "/v0/sandboxes", { metadata: { name: "net-b" }, spec: { runtime: { image }, network: { proxy: { routing } } } });
      expect(created.status).toBe(200);
      const b = new SandboxInstance(created.body);
      const setNetwork = async (network: unknown) => {
        const current = (await call("GET", "/v0/sandboxes/net-b")).body;
        expect((await call("PUT", "/v0/sandboxes/net-b", { ...current, spec: { ...current.spec, network } })).status).toBe(200);
      };
      const run = async (command: string) => {
        const r = await b.process.exec({ command, waitForCompletion: true, timeout: 30 } as never);
        return { code: r.exitCode, out: (r.logs ?? "").trim() };
      };
      await b.fs.write("/tmp/connect.js", CONNECT_CLIENT);
      expect((await run("env")).out).toContain(`HTTPS_PROXY=https://127.0.0.1:${new URL(net.url).port}`);
      const listed = await run(
        `node -e 'fetch("${net.env.BL_API_URL}/sandboxes", { headers: { authorization: "Bearer ${KEY}", "x-blaxel-workspace": "${WS}" } }).then((r) => r.json()).then((l) => console.log(l.map((s) => s.metadata.name).sort().join(",")))'`,
      );
      expect(listed.out).toContain("net-a,net-b");
      const proxied = await run(`node /tmp/connect.js https://${host}/echo/swarm`);
      expect(proxied.code, proxied.out).toBe(0);
      expect(JSON.parse(proxied.out)).toMatchObject({ url: "/echo/swarm", headers: { "x-injected": "swarm-secret-1" } });
      const direct = () => run(`node -e '${DIRECT_GET}' ${hostAnyUrl}`);
      expect((await direct()).out).toBe("host-any");
      await setNetwork({ forbiddenDomains: [host], proxy: { routing } });
      expect((await direct()).out).toMatch(/^ERR /);
      expect((await run(`node /tmp/connect.js https://${host}/echo/blocked`)).out).toContain("CONNECT 403");
      await setNetwork({ proxy: { routing } });
      expect((await direct()).out).toBe("host-any");
      expect((await run(`node /tmp/connect.js https://${host}/echo/again`)).code).toBe(0);
      // After the agent's own upgrade (a new agent in the same container) the tunnels lead to the new one.
      expect(await b.system.upgrade({ version: "latest" } as never)).toMatchObject({ message: "Upgrade initiated" });
      for (let tries = 0; ; tries++) {
        const health = await fetch(`${b.metadata!.url}/health`, { headers: { "x-blaxel-authorization": `Bearer ${KEY}` } }).catch(() => undefined);
        const body = health?.ok ? ((await health.json()) as { upgradeCount?: number; lastUpgrade?: { status: string } }) : undefined;
        if (body?.upgradeCount && body.lastUpgrade?.status === "completed") break;
        if (tries > 300) throw new Error(`the upgrade did not complete: ${JSON.stringify(body)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(JSON.parse((await run(`node /tmp/connect.js https://${host}/echo/upgraded`)).out)).toMatchObject({ url: "/echo/upgraded" });
    } finally {
      await net.stop();
      hostAny.close();
    }
    expect(servicesOf("sandbox-kit.sandbox=net-a")).toHaveLength(0);
    expect(docker("ps", "--all", "--quiet", "--filter", "label=sandbox-kit.kind=swarm-network-helper")).toBe("");
  }, 400_000);

  it("standby pauses the task's container through its node's engine; a request wakes it and is answered", async () => {
    const sleepy = await serveSimulator(
      { port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", testHooks: true },
      { launcher: new SwarmLauncher({ image, readyTimeoutMs: 180_000, pollMs: 250 }) },
    );
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${sleepy.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
    try {
      expect((await call("GET", "/health")).body.sandboxes.standby.unavailable).toBeUndefined();
      expect((await call("POST", "/v0/sandboxes", { metadata: { name: "sleeper" }, spec: { runtime: { image } } })).status).toBe(200);
      // Its node's engine is the launcher's own daemon: /health says standby (and a policy's cut) can be done there.
      expect((await call("GET", "/health")).body.sandboxes.nodes).toEqual([
        expect.objectContaining({ state: "ready", sandboxes: 1, engine: { reachable: true, via: "the launcher's own Docker daemon" } }),
      ]);
      await call("POST", `/sbx/${WS}/sleeper/process`, { command: "sh -c 'while :; do date +%s%N >> /tmp/ticks; sleep 0.1; done'", waitForCompletion: false });
      const [service] = servicesOf("sandbox-kit.sandbox=sleeper");
      const task = docker("service", "ps", "--quiet", "--no-trunc", service!).split("\n")[0]!;
      const container = docker("inspect", "--type", "task", "--format", "{{.Status.ContainerStatus.ContainerID}}", task);
      expect((await call("POST", "/_sim/standby", { workspace: WS, sandbox: "sleeper", state: "STANDBY" })).status).toBe(200);
      expect(docker("inspect", "--format", "{{.State.Paused}}", container)).toBe("true");
      expect((await call("GET", "/v0/sandboxes/sleeper")).body.state).toBe("STANDBY");
      // A request across it: the proxy thaws the sandbox first, then the command runs and answers.
      const woke = await call("POST", `/sbx/${WS}/sleeper/process`, { command: "wc -l < /tmp/ticks", waitForCompletion: true });
      expect(woke.status).toBe(200);
      expect(Number(woke.body.stdout)).toBeGreaterThan(0);
      expect(docker("inspect", "--format", "{{.State.Paused}}", container)).toBe("false");
      expect((await call("GET", "/v0/sandboxes/sleeper")).body.state).toBe("RUNNING");
      // Asleep again, then deleted: the stop unpauses first and the service goes.
      expect((await call("POST", "/_sim/standby", { workspace: WS, sandbox: "sleeper", state: "STANDBY" })).status).toBe(200);
      expect((await call("DELETE", "/v0/sandboxes/sleeper")).status).toBe(200);
      await eventually(() => servicesOf("sandbox-kit.sandbox=sleeper").length === 0, 60_000);
    } finally {
      await sleepy.stop();
    }
  }, 300_000);

  it.skipIf(!hasRegistry)(
    `with --swarm-registry the image is pushed to the registry and the node runs the registry's copy${hasRegistry ? "" : " (skipped: Debian's docker-registry is not installed)"}`,
    async () => {
      const small = tinyImage();
      const dir = tempBase("swarm-registry-");
      const port = await freePort();
      writeFileSync(join(dir, "config.yml"), `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/store\nhttp:\n  addr: 127.0.0.1:${port}\n`);
      const registry = spawn("docker-registry", ["serve", join(dir, "config.yml")], { stdio: "ignore" });
      children.push(registry);
      await eventually(() => {
        try {
          execFileSync("curl", ["-sf", `http://127.0.0.1:${port}/v2/`], { stdio: "ignore" });
          return true;
        } catch {
          return false;
        }
      }, 20_000);
      const launcher = new SwarmLauncher({ image: small, registry: `127.0.0.1:${port}`, readyTimeoutMs: 120_000, pollMs: 250 });
      expect(launcher.describe().detail).toContain(`images pushed to 127.0.0.1:${port}`);
      const spec = { ...specFor(tempBase("swarm-reg-box-"), "pushed"), workspace: WS };
      const agent = await launcher.start(spec);
      try {
        const [service] = servicesOf(`sandbox-kit.data-dir=${spec.dataDir}`);
        expect(docker("service", "inspect", "--format", "{{.Spec.TaskTemplate.ContainerSpec.Image}}", service!)).toMatch(
          new RegExp(`^127\\.0\\.0\\.1:${port}/sandbox-kit-test/swarm-tiny:2@sha256:`),
        );
        expect(execFileSync("curl", ["-sf", `http://127.0.0.1:${port}/v2/_catalog`], { encoding: "utf8" })).toContain("sandbox-kit-test/swarm-tiny");
        expect((await exec(agent.url, spec.token, "echo from the pushed image")).stdout).toBe("from the pushed image\n");
      } finally {
        await agent.stop(2_000);
        await launcher.close();
        docker("image", "rm", `127.0.0.1:${port}/sandbox-kit-test/swarm-tiny:2`);
      }
      expect(servicesOf(`sandbox-kit.data-dir=${spec.dataDir}`)).toHaveLength(0);
      registry.kill("SIGTERM");
      await new Promise((r) => registry.once("exit", r));
      expect(isAlive(registry.pid!)).toBe(false);
    },
    180_000,
  );
});

/**
 * A second Docker engine as a worker: a container of the tests' Debian base running the host's dockerd (the host's
 * /usr read-only; vfs storage on an exec tmpfs; SYS_ADMIN and NET_ADMIN, since a --privileged container cannot be
 * made on these machines: "unable to apply caps"), joined to a swarm whose manager advertises the Docker bridge's
 * address (127.0.0.1 is not the manager from inside a container). The package and the temp dir are bind-mounted
 * into it at the same paths: the shared storage a cluster needs (docs/launchers.md).
 */
async function startWorker(name: string, shared: string[]): Promise<{ hostname: string; nodeId: string }> {
  docker(
    "run",
    "--detach",
    "--name",
    name,
    "--hostname",
    name,
    "--cap-add",
    "SYS_ADMIN",
    "--cap-add",
    "NET_ADMIN",
    "--security-opt",
    "seccomp=unconfined",
    "--security-opt",
    "apparmor=unconfined",
    "--cgroupns",
    "host",
    "--volume",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--volume",
    "/usr:/usr:ro",
    "--tmpfs",
    "/var/lib/docker:exec,dev,suid",
    "--tmpfs",
    "/run",
    ...shared.flatMap((dir) => ["--volume", `${dir}:${dir}`]),
    "sandbox-kit-test/debian-build:bookworm",
    "/usr/sbin/dockerd",
    "--storage-driver",
    "vfs",
    "--iptables=false",
  );
  await eventually(() => {
    try {
      return docker("exec", name, "docker", "info", "--format", "{{.ServerVersion}}") !== "";
    } catch {
      return false;
    }
  }, 30_000);
  const manager = docker("info", "--format", "{{.Swarm.NodeAddr}}");
  docker("exec", name, "docker", "swarm", "join", "--token", docker("swarm", "join-token", "--quiet", "worker"), `${manager}:2377`);
  const nodeId = docker("exec", name, "docker", "info", "--format", "{{.Swarm.NodeID}}");
  return { hostname: name, nodeId };
}

describe.skipIf(swarm.unavailable !== undefined || !swarm.initialised)(
  `swarm launcher with a second engine as a worker${swarm.unavailable ? ` (skipped: ${swarm.unavailable})` : !swarm.initialised ? " (skipped: the daemon was already in a swarm this test did not make)" : ""}`,
  () => {
    const worker = `sbxk-worker-${process.pid}`;
    let node: { hostname: string; nodeId: string } | undefined;
    let why: string | undefined;
    let small = "";
    let sim: ServedSimulator | undefined;
    beforeAll(async () => {
      try {
        small = tinyImage();
        const bridge = docker("network", "inspect", "bridge", "--format", "{{(index .IPAM.Config 0).Gateway}}");
        docker("swarm", "init", "--advertise-addr", bridge);
        node = await startWorker(worker, [...new Set([realpathSync(join(fileURLToPath(import.meta.url), "../../../..")), realpathSync(tmpdir())])]);
        execFileSync("sh", ["-c", `docker save "$1" | docker exec -i "$2" docker load`, "sh", small, worker], { stdio: "ignore" });
      } catch (err) {
        why = `no worker engine could be started here: ${((err as { stderr?: Buffer | string }).stderr?.toString() || (err as Error).message).trim().split("\n").pop()}`;
        console.warn(`swarm worker test skipped: ${why}`);
      }
    }, 180_000);
    afterAll(async () => {
      await sim?.stop();
      try {
        docker("rm", "--force", "--volumes", worker);
      } catch {
        // Never started, or already removed by the test.
      }
      try {
        docker("swarm", "leave", "--force");
      } catch {
        // Not in a swarm.
      }
    }, 120_000);

    it("a constraint places the sandbox on the worker; its agent and preview answer there; the worker going down ends it with the reason", async (ctx) => {
      if (why) return ctx.skip(why);
      const launcher = new SwarmLauncher({ image: small, constraints: [`node.hostname==${node!.hostname}`], readyTimeoutMs: 30_000, pollMs: 250 });
      sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", imageSource: "host" }, { launcher });
      const call = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${sim!.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
      };
      expect((await call("POST", "/v0/sandboxes", { metadata: { name: "far" }, spec: { runtime: { image: small } } })).status).toBe(200);
      const [service] = servicesOf("sandbox-kit.sandbox=far");
      const task = docker("service", "ps", "--quiet", "--no-trunc", service!).split("\n")[0]!;
      expect(docker("inspect", "--type", "task", "--format", "{{.NodeID}}", task)).toBe(node!.nodeId);
      const ran = await call("POST", `/sbx/${WS}/far/process`, { command: "hostname", waitForCompletion: true });
      expect(ran.body.stdout.trim()).toBe("far");
      // A server in the sandbox on the worker (the tiny image has no node of its own: the agent's), behind a preview.
      await call("POST", `/sbx/${WS}/far/process`, {
        command: `/opt/sandbox-kit/bin/node -e 'require("http").createServer((q, s) => s.end("worker:" + q.url)).listen(3000)'`,
        waitForCompletion: false,
      });
      const preview = await call("POST", "/v0/sandboxes/far/previews", { metadata: { name: "site" }, spec: { port: 3000, public: true } });
      expect(preview.status).toBe(200);
      let page = "";
      for (let tries = 0; tries < 100 && page !== "worker:/hello"; tries++, await new Promise((r) => setTimeout(r, 100))) {
        const res = await fetch(`${preview.body.spec.url}/hello`);
        page = await res.text();
      }
      expect(page).toBe("worker:/hello");
      // The worker's engine goes away: the swarm marks its node down, and the sandbox's agent exit says so.
      docker("rm", "--force", "--volumes", worker);
      let events = "";
      for (let tries = 0; tries < 120 && !/node .*(down|left)/.test(events); tries++, await new Promise((r) => setTimeout(r, 500))) {
        events = JSON.stringify((await call("GET", "/v0/sandboxes/far")).body);
      }
      expect(events).toMatch(new RegExp(`node ${node!.hostname} \\(${node!.nodeId}\\) is (down|disconnected)`));
    }, 300_000);
  },
);

describe.skipIf(swarm.unavailable !== undefined || !swarm.initialised)("swarm launcher where no swarm is", () => {
  it("a start says the daemon is in no swarm and what to run", async () => {
    expect(docker("info", "--format", "{{.Swarm.LocalNodeState}}")).toBe("inactive"); // the describes above left theirs
    const error = await new SwarmLauncher({ readyTimeoutMs: 5_000 }).start(specFor(tempBase("swarm-none-"), "lonely")).catch((err: Error) => err);
    expect((error as Error).message).toMatch(/cannot start sandbox "lonely": the Docker daemon is not in a swarm .*docker swarm init/);
  });
});
