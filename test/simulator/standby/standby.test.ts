import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { eventually } from "../launcher/helpers.js";
import { eventually as eventuallyAsync } from "../../sandbox-agent/schedules/eventually.js";
import { isolationUnavailable, pidNamespaceOf, pidsInNamespace, pidsWithMarker } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { spawnSimulatorProcess } from "../../helpers/simulator.js";

/**
 * Standby under the default (isolating) launcher, with real sandboxes and @blaxel/core: an idle sandbox's
 * processes stop in place (checked by host pid and by the file a loop writes), any request resumes them with
 * the same pids, keepAlive processes and open log streams hold it awake, the test hook forces it, and a
 * stop or delete in standby leaves no stopped process behind. (npm run build first: the agents run from dist/.)
 */
type Sdk = typeof import("@blaxel/core");
const KEY = "standby-admin-key-0001";
const WS = "standby";
const IDLE_MS = 1_500;
let sim: ServedSimulator;
let sdk: Sdk;
let counter = 0;

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** The sandbox as the control plane answers it (a read does not wake it). */
const stateOf = async (name: string) => (await call("GET", `/v0/sandboxes/${name}`)).body as { state?: string; status?: string; lastUsedAt?: string };
/** Polls the control plane until the sandbox reads `state`. */
const reaches = (name: string, state: string, ms = 15_000) => eventuallyAsync(async () => (await stateOf(name)).state === state, ms, `${name} ${state}`);
const hook = (sandbox: string, state: "STANDBY" | "RUNNING") => call("POST", "/_sim/standby", { workspace: WS, sandbox, state });

/** The host's view of a process: its state letter (T = stopped). */
function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

/** Starts a loop appending a timestamp (ms) every 100 ms to /tmp/ticks; its host pid and its PID namespace. */
async function startTicker(sandbox: InstanceType<Sdk["SandboxInstance"]>): Promise<{ pid: number; namespace: string; marker: string }> {
  const marker = `ticker-${process.pid}-${++counter}`;
  await sandbox.process.exec({ name: marker, command: `sh -c 'while :; do date +%s%3N >> /tmp/ticks; sleep 0.1; done' ${marker}`, waitForCompletion: false });
  await eventually(() => pidsWithMarker(marker).length > 0);
  const pid = Math.min(...pidsWithMarker(marker)); // the ticker itself (a child it forks shows its marker for an instant)
  return { pid, namespace: pidNamespaceOf(pid)!, marker };
}

function ticks(name: string): number[] {
  const file = join(sim.agents.rootDir(WS, name), "tmp", "ticks");
  return existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean).map(Number) : [];
}

beforeAll(async () => {
  sim = await serveSimulator({
    port: 0,
    imageSource: "host",
    apiKey: KEY,
    workspace: WS,
    logLevel: "silent",
    testHooks: true,
    standbyAfterMs: IDLE_MS,
    sandboxRetentionMs: 0,
    warmSandboxes: 1,
  });
  sdk = await sdkForSimulator(sim.env);
});
afterAll(async () => {
  await sim?.stop();
});

describe.skipIf(isolationUnavailable !== undefined)("standby (bwrap)", () => {
  it("an idle sandbox stops in place: the loop writes nothing while STANDBY, then goes on with the same pid after a request, which answers normally", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "ticking" });
    const ticker = await startTicker(sandbox);
    await eventually(() => ticks("ticking").length >= 3);
    await reaches("ticking", "STANDBY");
    const asleep = await stateOf("ticking");
    expect(asleep.status).toBe("DEPLOYED");
    // Every process of the sandbox (its init, the agent, the loop, its sleep) is stopped, none is gone.
    const members = pidsInNamespace(ticker.namespace);
    expect(members.length).toBeGreaterThanOrEqual(3);
    expect(members.map(procState).every((s) => s === "T")).toBe(true);
    const before = ticks("ticking");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(ticks("ticking")).toEqual(before);

    // The first call after standby: a normal answer, no retry.
    const woke = Date.now();
    expect((await sandbox.fs.read("/tmp/ticks")).length).toBeGreaterThan(0);
    expect((await stateOf("ticking")).state).toBe("RUNNING");
    expect(pidsWithMarker(ticker.marker)).toContain(ticker.pid);
    expect(procState(ticker.pid)).not.toBe("T");
    await eventually(() => ticks("ticking").length > before.length + 2);
    // The gap is in its file: consecutive ticks a second or more apart (the loop slept with its sandbox).
    const all = ticks("ticking");
    expect(Math.max(...all.slice(1).map((t, i) => t - all[i]!))).toBeGreaterThanOrEqual(1_000);
    // lastUsedAt moved to the wake.
    expect(Date.parse((await stateOf("ticking")).lastUsedAt!)).toBeGreaterThanOrEqual(woke - 1_000);
  });

  it("a running keepAlive process holds the sandbox awake past the idle period; standby follows its end (its timeout)", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "kept" });
    await sandbox.process.exec({ name: "holder", command: "sleep 600", keepAlive: true, timeout: 4, waitForCompletion: false });
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 2));
    expect((await stateOf("kept")).state).toBe("RUNNING");
    await reaches("kept", "STANDBY");
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_000);
  });

  it("an open logs stream keeps it awake; once closed, it sleeps", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "streamed" });
    await sandbox.process.exec({ name: "quiet", command: "sleep 600", waitForCompletion: false });
    const stream = sandbox.process.streamLogs("quiet", { onLog: () => undefined });
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS * 3));
    expect((await stateOf("streamed")).state).toBe("RUNNING");
    stream.close();
    await reaches("streamed", "STANDBY");
  });

  it("/health says sandboxes go to standby, and after how long", async () => {
    const health = (await (await fetch(`${sim.url}/health`)).json()) as { sandboxes: { standby: unknown } };
    expect(health.sandboxes.standby).toEqual({ afterMs: IDLE_MS });
  });

  it("the test hooks force standby and wake (and refuse what they cannot do)", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "hooked" });
    const ticker = await startTicker(sandbox);
    const forced = await hook("hooked", "STANDBY");
    expect(forced).toMatchObject({ status: 200, body: { sandbox: "hooked", state: "STANDBY" } });
    expect(procState(ticker.pid)).toBe("T");
    expect((await stateOf("hooked")).state).toBe("STANDBY");
    expect((await hook("hooked", "RUNNING")).body.state).toBe("RUNNING");
    expect(procState(ticker.pid)).not.toBe("T");
    expect((await hook("nobody", "STANDBY")).status).toBe(404);
    expect((await call("POST", "/_sim/standby", { sandbox: "hooked", state: "ASLEEP" })).status).toBe(400);
  });

  it("a due `at` schedule wakes a sleeping sandbox for its run, then it sleeps again", async () => {
    const sandbox = await sdk.SandboxInstance.create({ name: "scheduled" });
    await sandbox.schedules.create({
      type: "at",
      value: new Date(Date.now() + 4_000).toISOString(),
      input: { command: "date +%s%3N > /tmp/ran", keepAlive: true, timeout: 30 },
    });
    expect((await hook("scheduled", "STANDBY")).body.state).toBe("STANDBY");
    const ran = join(sim.agents.rootDir(WS, "scheduled"), "tmp", "ran");
    await eventually(() => existsSync(ran) && readFileSync(ran, "utf8").trim() !== "", 20_000);
    await reaches("scheduled", "STANDBY");
  });

  it("delete and stop (archive) during standby leave no stopped process behind", async () => {
    for (const name of ["deleted-asleep", "archived-asleep"]) {
      const sandbox = await sdk.SandboxInstance.create({ name });
      const ticker = await startTicker(sandbox);
      expect((await hook(name, "STANDBY")).body.state).toBe("STANDBY");
      if (name === "deleted-asleep") expect((await call("DELETE", `/v0/sandboxes/${name}`)).status).toBe(200);
      else await sandbox.archive();
      // What is left, with its state, when it does not end: a process still stopped (T) means nothing thawed it.
      const left = () => pidsInNamespace(ticker.namespace).map((pid) => `${pid}:${procState(pid)}`);
      await eventually(() => left().length === 0, 15_000).catch(() => {
        throw new Error(`${name}: processes left after 15 s: ${left().join(" ")}`);
      });
    }
  });
});

describe.skipIf(isolationUnavailable !== undefined)("the simulator ending during standby leaves no stopped process", () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  });

  /** Creates a sandbox through `base`, starts the ticker in it through its URL, forces standby; its namespace. */
  async function asleepThrough(base: string, name: string): Promise<string> {
    const headers = { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": WS, "content-type": "application/json" };
    const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
    expect((await post("/v0/sandboxes", { metadata: { name } })).status).toBe(200);
    const marker = `ticker-${process.pid}-${++counter}`;
    expect((await post(`/sbx/${WS}/${name}/process`, { command: `sh -c 'while :; do sleep 0.1; done' ${marker}`, waitForCompletion: false })).status).toBe(200);
    await eventually(() => pidsWithMarker(marker).length > 0);
    const namespace = pidNamespaceOf(pidsWithMarker(marker)[0]!)!;
    const forced = await post("/_sim/standby", { workspace: WS, sandbox: name, state: "STANDBY" });
    expect(forced.status).toBe(200);
    expect(pidsInNamespace(namespace).every((pid) => procState(pid) === "T")).toBe(true);
    return namespace;
  }

  it("stop()", async () => {
    const other = await serveSimulator({
      port: 0,
      imageSource: "host",
      apiKey: KEY,
      workspace: WS,
      logLevel: "silent",
      testHooks: true,
      standbyAfterMs: 0,
      warmSandboxes: 0,
    });
    const namespace = await asleepThrough(other.url, "stopped-sim");
    await other.stop();
    // Its processes took SIGTERM (thawed first) or SIGKILL: none is left, stopped or not.
    await eventually(() => pidsInNamespace(namespace).length === 0, 15_000);
  });

  it("kill -9", async () => {
    const { child, url } = await spawnSimulatorProcess(
      ["--image-source", "host", "--api-key", KEY, "--workspace", WS, "--test-hooks", "--standby-after", "0", "--warm-sandboxes", "0", "--log-level", "silent"],
      { track: children },
    );
    const namespace = await asleepThrough(url, "killed-sim");
    child.kill("SIGKILL");
    await eventually(() => pidsInNamespace(namespace).length === 0, 15_000);
  });
});
