import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, type ClusterInfo } from "../../simulator/cluster/cluster.js";
import { ImageStore } from "../../simulator/images/image-store.js";
import { SwarmLauncher } from "../../simulator/launcher/swarm.js";
import { serveSimulator, type ServedSimulator } from "../../simulator/serve.js";
import { ensureDockerDaemon, tinyImage } from "../helpers/docker.js";
import { sdkForSimulator } from "../helpers/sdk.js";

/**
 * A three-node cluster on this machine (`npm run cluster`: a manager and two workers, each a Docker-in-Docker
 * node with its own daemon, address and storage, one swarm, a registry on the manager), and the simulator's swarm
 * launcher pointed at it (DOCKER_HOST of the manager): an image only the simulator's store has reaches every node
 * (imported into the manager, pushed to the registry), 12 sandboxes spread over the nodes (events and /health say
 * where), each writes and runs a file, a preview on a worker's sandbox answers, and from it the simulator's API
 * answers while a policy cuts its direct outbound path live; a worker killed (`docker kill` of
 * its node) ends its sandboxes with an event naming it while creates land on live nodes, and its return is seen;
 * the manager restarted, the records and the swarm's services agree again (a service whose sandbox was deleted
 * meanwhile is swept); teardown leaves no
 * container, volume or network of the cluster, by id.
 */
const unavailable = await ensureDockerDaemon();
const KEY = "cluster-test-key-0123";
const WS = "clusterws";
const docker = (...args: string[]) => execFileSync("docker", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

describe.skipIf(unavailable !== undefined)(`a three-node cluster${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  const cluster = new Cluster({ name: `sbxk-test-${process.pid}`, workers: 2 });
  const cache = mkdtempSync(join(tmpdir(), "cluster-images-"));
  const image = `sandbox-kit-test/cluster-tiny:${process.pid}`;
  let info: ClusterInfo | undefined;
  let sim: ServedSimulator | undefined;
  let why: string | undefined;
  beforeAll(async () => {
    try {
      info = await cluster.up();
    } catch (err) {
      // A node's dockerd that cannot run nested (no overlay, no cgroup access...) is a missing capability, named.
      if (/dockerd exited|did not answer/.test((err as Error).message)) why = `nested Docker nodes cannot run here: ${(err as Error).message}`;
      else throw err;
    }
    if (why) return;
    // An image the cluster's daemons have never seen: only the simulator's store has it.
    docker("tag", tinyImage(), image);
    const tar = join(cache, "tiny.tar");
    execFileSync("sh", ["-c", `docker save "$1" > "$2"`, "sh", image, tar]);
    docker("rmi", image);
    const store = new ImageStore({ dir: cache, docker: null });
    await store.import(tar, image);
    await store.close();
    const launcher = new SwarmLauncher({
      env: { ...process.env, DOCKER_HOST: info!.dockerHost },
      registry: info!.registry,
      readyTimeoutMs: 120_000,
      pollMs: 500,
    });
    sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS, logLevel: "silent", imageCache: cache }, { launcher });
  }, 900_000);
  afterAll(async () => {
    await sim?.stop().catch(() => undefined);
    const before = { containers: docker("ps", "--all", "--quiet", "--no-trunc", "--filter", `label=sandbox-kit.cluster=${cluster.name}`) };
    const removed = await cluster.down();
    // Nothing left, by id: each container, volume and network the cluster made is gone.
    for (const id of removed.containers) expect(() => docker("container", "inspect", id)).toThrow();
    for (const id of removed.volumes) expect(() => docker("volume", "inspect", id)).toThrow();
    for (const id of removed.networks) expect(() => docker("network", "inspect", id)).toThrow();
    expect(removed.containers.sort()).toEqual(before.containers.split("\n").filter(Boolean).sort());
    rmSync(cache, { recursive: true, force: true });
  }, 300_000);

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${sim!.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
  };
  const nodeOf = async (name: string): Promise<string> => {
    const events = ((await call("GET", `/v0/sandboxes/${name}`)).body?.events ?? []) as { message: string }[];
    return (
      [...events]
        .reverse()
        .map((e) => /\(on node ([^)]+)\)/.exec(e.message)?.[1])
        .find(Boolean) ?? ""
    );
  };

  it("spreads 12 sandboxes over the three nodes; each writes and runs a file; a preview answers from a worker; a killed worker's sandboxes end naming it; a manager restart leaves records and services consistent", async (ctx) => {
    if (why) return ctx.skip(why);
    const { SandboxInstance } = await sdkForSimulator(sim!.env);
    const names = Array.from({ length: 12 }, (_, i) => `c${i}`);
    for (let i = 0; i < names.length; i += 4) {
      await Promise.all(names.slice(i, i + 4).map((name) => SandboxInstance.create({ name, image, memory: 512 })));
    }
    const where = new Map<string, string>();
    for (const name of names) where.set(name, await nodeOf(name));
    const workers = info!.nodes.filter((n) => n.role === "worker").map((n) => n.name);
    for (const w of workers) expect([...where.values()]).toContain(w);
    const health = (await (await fetch(`${sim!.url}/health`)).json()) as { sandboxes: { nodes?: { name: string; state: string; sandboxes: number }[] } };
    expect(health.sandboxes.nodes?.map((n) => n.name).sort()).toEqual(info!.nodes.map((n) => n.name).sort());
    expect(health.sandboxes.nodes?.reduce((sum, n) => sum + n.sandboxes, 0)).toBe(12);
    // The file API and commands see one `/`, wherever the sandbox runs.
    await Promise.all(
      names.map(async (name) => {
        const box = await SandboxInstance.get(name);
        await box.fs.write("/tmp/who.sh", `#!/bin/sh\necho ${name} on $(hostname)\n`);
        const ran = await box.process.exec({ command: "sh /tmp/who.sh", waitForCompletion: true });
        expect(ran.logs).toContain(`${name} on ${name}`);
      }),
    );
    // A preview of a server in a sandbox on a worker.
    const onWorker = names.find((n) => where.get(n) === workers[0])!;
    const box = await SandboxInstance.get(onWorker);
    await box.process.exec({
      name: "site",
      command: `/opt/sandbox-kit/bin/node -e 'require("http").createServer((q, s) => s.end("from ${onWorker}:" + q.url)).listen(3000)'`,
      waitForPorts: [3000],
    } as never);
    const preview = await box.previews.create({ metadata: { name: "site" }, spec: { port: 3000, public: true } });
    const page = await fetch(`${preview.spec!.url}/hello`);
    expect(await page.text()).toBe(`from ${onWorker}:/hello`);
    // The sandbox network on a worker: the simulator's API by its URL (over the agent's tunnels), and a policy
    // restricting destinations cuts the direct path out (here to the manager's registry) live.
    const run = async (command: string) => ((await box.process.exec({ command, waitForCompletion: true } as never)).logs ?? "").trim();
    const direct = () =>
      run(
        `/opt/sandbox-kit/bin/node -e 'fetch("http://${info!.registry}/v2/", { signal: AbortSignal.timeout(4000) }).then((r) => r.text()).then(console.log, (e) => console.log("ERR " + (e.cause?.code ?? e.message)))'`,
      );
    const api = () =>
      run(
        `/opt/sandbox-kit/bin/node -e 'fetch("${sim!.env.BL_API_URL}/sandboxes/${onWorker}", { headers: { authorization: "Bearer ${KEY}", "x-blaxel-workspace": "${WS}" } }).then((r) => console.log(r.status))'`,
      );
    expect(await direct()).toBe("{}");
    expect(await api()).toBe("200");
    const current = (await call("GET", `/v0/sandboxes/${onWorker}`)).body;
    expect(
      (await call("PUT", `/v0/sandboxes/${onWorker}`, { ...current, spec: { ...current.spec, network: { forbiddenDomains: ["blocked.example"] } } })).status,
    ).toBe(200);
    expect(await direct()).toMatch(/^ERR /);
    expect(await api()).toBe("200");
    // A worker dies: its sandboxes end with an event naming its node; creates meanwhile land on live nodes.
    const victim = workers[1]!;
    const lost = names.filter((n) => where.get(n) === victim);
    docker("kill", info!.nodes.find((n) => n.name === victim)!.container);
    const killedAt = Date.now();
    const late = await SandboxInstance.create({ name: "after-kill", image, memory: 512 });
    expect(await nodeOf("after-kill")).not.toBe(victim);
    await late.fs.write("/tmp/ok", "ok");
    for (const name of lost) {
      let text = "";
      while (Date.now() - killedAt < 60_000 && !text.includes(`its node ${victim}`)) {
        text = JSON.stringify((await call("GET", `/v0/sandboxes/${name}`)).body?.events ?? []);
        if (!text.includes(`its node ${victim}`)) await new Promise((r) => setTimeout(r, 500));
      }
      expect(text).toContain(`its node ${victim}`);
    }
    const after = (await (await fetch(`${sim!.url}/health`)).json()) as { sandboxes: { nodes?: { name: string; state: string }[] } };
    expect(after.sandboxes.nodes?.find((n) => n.name === victim)?.state).toMatch(/down|disconnected|unknown/);
    // The node comes back (its container started again, same storage): it rejoins, and /health sees it ready.
    docker("start", info!.nodes.find((n) => n.name === victim)!.container);
    let state = "";
    for (const started = Date.now(); Date.now() - started < 120_000 && state !== "ready";) {
      const h = (await (await fetch(`${sim!.url}/health`)).json()) as { sandboxes: { nodes?: { name: string; state: string }[] } };
      state = h.sandboxes.nodes?.find((n) => n.name === victim)?.state ?? "";
      if (state !== "ready") await new Promise((r) => setTimeout(r, 1_000));
    }
    expect(state).toBe("ready");
    // The manager restarts (its container stopped, then started: same volume, its registry served again). A
    // sandbox deleted meanwhile leaves a service nothing tracks any more (its removal could not reach the
    // manager): once the manager answers it is swept; every other record gets (or keeps) exactly one service.
    const manager = info!.nodes.find((n) => n.role === "manager")!;
    const onManager = (label: string) =>
      execFileSync("docker", ["service", "ls", "--quiet", "--filter", `label=${label}`], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, DOCKER_HOST: info!.dockerHost },
      })
        .split("\n")
        .filter(Boolean);
    const doomed = names.find((n) => where.get(n) === workers[0] && n !== onWorker)!;
    expect(onManager(`sandbox-kit.sandbox=${doomed}`)).toHaveLength(1);
    docker("stop", "--time", "1", manager.container);
    await SandboxInstance.delete(doomed);
    for (let tries = 0; (await call("GET", `/v0/sandboxes/${doomed}`)).status !== 404 && tries < 120; tries++) await new Promise((r) => setTimeout(r, 500));
    docker("start", manager.container);
    const alive = [...names.filter((n) => n !== doomed && !lost.includes(n)), "after-kill"];
    const consistent = async () => {
      if (onManager(`sandbox-kit.sandbox=${doomed}`).length > 0) return false;
      for (const name of alive) {
        if ((await call("GET", `/v0/sandboxes/${name}`)).body?.status !== "DEPLOYED") return false;
        if (onManager(`sandbox-kit.sandbox=${name}`).length !== 1) return false;
      }
      return true;
    };
    let agreed = false;
    for (const started = Date.now(); Date.now() - started < 180_000 && !agreed;) {
      agreed = await consistent().catch(() => false);
      if (!agreed) await new Promise((r) => setTimeout(r, 2_000));
    }
    expect(agreed).toBe(true);
    const again = await SandboxInstance.get(alive[0]!);
    expect((await again.process.exec({ command: "echo after the manager restarted", waitForCompletion: true })).logs).toContain("after the manager restarted");
    for (const name of [...names, "after-kill"]) await SandboxInstance.delete(name).catch(() => undefined);
  }, 600_000);
});
