import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { LaunchError, ProcessLauncher, type AgentHandle, type LaunchSpec, type Launcher } from "../../../simulator/launcher/index.js";
import { eventually, isAlive } from "../launcher/helpers.js";

/**
 * Status and events always tell the truth, through HTTP against
 * the simulator with real agents: a sandbox is DEPLOYING until its agent is
 * healthy, FAILED with the reason when it cannot start; archive and
 * deactivate stop the agent (files kept), unarchive and enabling start it
 * again; a new spec.runtime.envs reboots it; deleting a workspace stops its
 * sandboxes' agents; a stopped agent is not billed.
 * (npm run build first: the agents run from dist/.)
 */
const KEY = "lifecycle-admin-key";
const HOUR = 3_600_000;

/** The process launcher, with a gate a test can hold a start at, and names that refuse to start. */
class GatedLauncher implements Launcher {
  readonly name = "gated-process";
  private readonly inner = new ProcessLauncher();
  gate: { reached: () => void; release: Promise<void> } | undefined;
  readonly refuse = new Set<string>();

  async start(spec: LaunchSpec): Promise<AgentHandle> {
    if (this.refuse.has(spec.sandbox)) throw new LaunchError(`no room for ${spec.sandbox} on this test host`);
    const gate = this.gate;
    if (gate) {
      this.gate = undefined;
      gate.reached();
      await gate.release;
    }
    return this.inner.start(spec);
  }

  /** Holds the next start until the returned release() is called; `reached` resolves once that start began. */
  hold(): { reached: Promise<void>; release: () => void } {
    let release!: () => void;
    let reached!: () => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    this.gate = { reached, release: new Promise<void>((r) => (release = r)) };
    return { reached: reachedP, release };
  }
}

let sim: ServedSimulator;
const launcher = new GatedLauncher();
beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, testHooks: true, logLevel: "silent" }, { launcher });
});
afterAll(async () => {
  await sim?.stop();
});

const auth = (r: request.Test, workspace = "default") => r.set("authorization", `Bearer ${KEY}`).set("x-blaxel-workspace", workspace);
const api = {
  get: (path: string, ws?: string) => auth(request(sim.url).get(path), ws),
  post: (path: string, body: unknown = {}, ws?: string) => auth(request(sim.url).post(path), ws).send(body as object),
  put: (path: string, body: unknown, ws?: string) => auth(request(sim.url).put(path), ws).send(body as object),
  delete: (path: string, ws?: string) => auth(request(sim.url).delete(path), ws),
};

/** Runs a shell command in the sandbox through the proxy (its cwd is the sandbox's root). */
async function sh(sandbox: string, command: string, ws = "default"): Promise<string> {
  const res = await api.post(`/sbx/${ws}/${sandbox}/process`, { command, waitForCompletion: true }, ws).expect(200);
  return String(res.body.stdout ?? res.body.logs ?? "").trim();
}

type Event = { type: string; status: string; message: string };
const statuses = (events: Event[]) => events.map((e) => e.status);
const agentOf = (name: string, ws = "default") => sim.agents.get(ws, name);

async function computeGbs(sandbox: string): Promise<number> {
  const q = new URLSearchParams({
    startTime: "2026-01-01T00:00:00Z",
    endTime: "2028-01-01T00:00:00Z",
    groupBy: "billing_dimension,resource_name",
    resolution: "monthly",
  });
  const res = await api.get(`/v0/accounts/local/metrics?${q}`).expect(200);
  const data = res.body.data as { billingDimension: string; resourceName: string; summary: { usage: number } }[];
  return data.find((e) => e.billingDimension === "sandbox_compute_runtime_gbs" && e.resourceName === sandbox)?.summary.usage ?? 0;
}

describe("a real sandbox's status and events follow its agent", () => {
  it("is DEPLOYING until its agent is healthy; create answers DEPLOYED", async () => {
    const held = launcher.hold();
    const creating = api.post("/v0/sandboxes", { metadata: { name: "slow-start" } }).then((r) => r);
    await held.reached;
    const during = await api.get("/v0/sandboxes/slow-start").expect(200);
    expect(during.body.status).toBe("DEPLOYING");
    expect(during.body.events.at(-1)).toMatchObject({ status: "DEPLOYING", message: "deploying: starting the sandbox agent" });
    held.release();
    const created = await creating;
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body.status).toBe("DEPLOYED");
    expect(created.body.events.at(-1)).toMatchObject({ type: "agent", status: "DEPLOYED", message: "sandbox agent is healthy" });
    expect(agentOf("slow-start")?.state).toBe("running");
  });

  it("is FAILED with the reason in its events when its agent cannot start; create answers 503 naming it", async () => {
    launcher.refuse.add("no-room");
    const res = await api.post("/v0/sandboxes", { metadata: { name: "no-room" } }).expect(503);
    expect(res.body.message).toMatch(/sandbox "no-room".*no room for no-room/);
    const got = await api.get("/v0/sandboxes/no-room").expect(200);
    expect(got.body.status).toBe("FAILED");
    expect(got.body.events.at(-1).message).toMatch(/^sandbox agent did not start: .*no room for no-room/);
    await api.delete("/v0/sandboxes/no-room").expect(200);
  });

  it("a sandbox deleted while its agent starts leaves no agent behind", async () => {
    const held = launcher.hold();
    const creating = api.post("/v0/sandboxes", { metadata: { name: "short-lived" } }).then((r) => r);
    await held.reached;
    await api.delete("/v0/sandboxes/short-lived").expect(200);
    held.release();
    const created = await creating;
    expect(created.status).toBe(503);
    expect(created.body.message).toMatch(/sandbox "short-lived".*stopped while it was starting/);
    expect(agentOf("short-lived")).toBeUndefined();
    // The delete waited for that start, stopped the agent, then moved the files aside: nothing is recreated.
    await eventually(() => !existsSync(sim.agents.sandboxDir("default", "short-lived")));
    await api.get("/v0/sandboxes/short-lived").expect(404);
  });

  it("archive stops the agent and keeps its files; unarchive starts it again on them", async () => {
    await api.post("/v0/sandboxes", { metadata: { name: "shelved" } }).expect(200);
    await sh("shelved", "echo kept > kept.txt");
    const archived = await api.post("/v0/sandboxes/shelved/archive").expect(200);
    expect(archived.body.status).toBe("ARCHIVED");
    expect(statuses(archived.body.events).slice(-2)).toEqual(["ARCHIVING", "ARCHIVED"]);
    expect(agentOf("shelved")).toBeUndefined();
    // An archived sandbox exists but has no agent now: 503 WORKLOAD_UNAVAILABLE (retry), not 404.
    const shelved = await api.post("/sbx/default/shelved/process", { command: "true" });
    expect(shelved.status).toBe(503);
    expect(shelved.body.error).toMatchObject({ code: "WORKLOAD_UNAVAILABLE", message: expect.stringContaining("ARCHIVED") });
    expect(readFileSync(join(sim.agents.sandboxDir("default", "shelved"), "root", "kept.txt"), "utf8")).toBe("kept\n");
    // Cross-sandbox schedule lists leave out a sandbox whose agent is stopped on purpose (no 503 for it).
    await api.get("/v0/schedules").expect(200);
    // Only an ARCHIVED sandbox unarchives; an archived one cannot be archived again.
    await api.post("/v0/sandboxes/shelved/archive").expect(409);

    const back = await api.post("/v0/sandboxes/shelved/unarchive").expect(200);
    expect(back.body.status).toBe("DEPLOYED");
    expect(statuses(back.body.events).slice(-2)).toEqual(["UNARCHIVING", "DEPLOYED"]);
    expect(await sh("shelved", "cat kept.txt")).toBe("kept");
    await api.post("/v0/sandboxes/shelved/unarchive").expect(409);
  });

  it("spec.enabled false deactivates (agent stopped, files kept); true starts it again", async () => {
    const created = await api.post("/v0/sandboxes", { metadata: { name: "napping" } }).expect(200);
    await sh("napping", "echo still here > note.txt");
    const off = await api.put("/v0/sandboxes/napping", { ...created.body, spec: { ...created.body.spec, enabled: false } }).expect(200);
    expect(off.body.status).toBe("DEACTIVATED");
    expect(statuses(off.body.events).slice(-2)).toEqual(["DEACTIVATING", "DEACTIVATED"]);
    expect(agentOf("napping")).toBeUndefined();

    const on = await api.put("/v0/sandboxes/napping", { ...off.body, spec: { ...off.body.spec, enabled: true } }).expect(200);
    expect(on.body.status).toBe("DEPLOYED");
    expect(statuses(on.body.events).slice(-2)).toEqual(["DEPLOYING", "DEPLOYED"]);
    expect(await sh("napping", "cat note.txt")).toBe("still here");
  });

  it("a new spec.runtime.envs reboots the sandbox with it (its files reset, as on the platform); other updates leave the agent alone", async () => {
    const created = await api
      .post("/v0/sandboxes", { metadata: { name: "envs" }, spec: { runtime: { envs: [{ name: "COLOUR", value: "blue" }] } } })
      .expect(200);
    await sh("envs", "echo mine > mine.txt");
    expect(await sh("envs", "echo $COLOUR")).toBe("blue");
    const pid = agentOf("envs")!.pid;

    const labelled = await api.put("/v0/sandboxes/envs", { metadata: { labels: { team: "a" } }, spec: created.body.spec }).expect(200);
    expect(labelled.body.status).toBe("DEPLOYED");
    expect(agentOf("envs")!.pid).toBe(pid);

    const spec = { ...created.body.spec, runtime: { ...created.body.spec.runtime, envs: [{ name: "COLOUR", value: "green" }] } };
    const updated = await api.put("/v0/sandboxes/envs", { spec }).expect(200);
    expect(updated.body.status).toBe("DEPLOYED");
    expect(updated.body.events.map((e: Event) => e.message)).toContain("spec.runtime.envs changed: rebooting the sandbox (its files are reset)");
    expect(statuses(updated.body.events).slice(-2)).toEqual(["DEPLOYING", "DEPLOYED"]);
    expect(agentOf("envs")!.pid).not.toBe(pid);
    expect(await sh("envs", "echo $COLOUR")).toBe("green");
    expect(await sh("envs", "cat mine.txt 2>&1 || echo gone")).toMatch(/gone$/);
  });

  it("a fork gets its own agent and a copy of the source's files", async () => {
    await api.post("/v0/sandboxes", { metadata: { name: "original" } }).expect(200);
    await sh("original", "echo first > shared.txt");
    const forked = await api.post("/v0/sandboxes/original/fork", { targetName: "copy" }).expect(200);
    expect(forked.body).toMatchObject({ name: "copy", type: "sandbox" });
    const got = await api.get("/v0/sandboxes/copy").expect(200);
    expect(got.body.status).toBe("DEPLOYED");
    expect(agentOf("copy")?.state).toBe("running");
    expect(await sh("copy", "cat shared.txt")).toBe("first");
    await sh("copy", "echo changed > shared.txt");
    expect(await sh("original", "cat shared.txt")).toBe("first");
  });

  it("a stopped agent is not billed: archived time costs nothing", async () => {
    await api.post("/_sim/clock", { freeze: true }).expect(200);
    try {
      await api.post("/v0/sandboxes", { metadata: { name: "billed" }, spec: { runtime: { memory: 1024 } } }).expect(200);
      await api.post("/_sim/clock", { advanceMs: HOUR }).expect(200);
      expect(await computeGbs("billed")).toBeCloseTo(3600, 6);
      await api.post("/v0/sandboxes/billed/archive").expect(200);
      await api.post("/_sim/clock", { advanceMs: HOUR }).expect(200);
      expect(await computeGbs("billed")).toBeCloseTo(3600, 6);
      await api.post("/v0/sandboxes/billed/unarchive").expect(200);
      await api.post("/_sim/clock", { advanceMs: HOUR }).expect(200);
      expect(await computeGbs("billed")).toBeCloseTo(7200, 6);
    } finally {
      await api.post("/_sim/clock", { freeze: false }).expect(200);
    }
  });

  it("deleting a workspace stops its sandboxes' agents and retires their files", async () => {
    await api.post("/v0/workspaces", { name: "doomed" }).expect(200);
    await api.post("/v0/sandboxes", { metadata: { name: "inside" } }, "doomed").expect(200);
    const dir = sim.agents.sandboxDir("doomed", "inside");
    const pid = agentOf("inside", "doomed")!.pid!;
    await api.delete("/v0/workspaces/doomed").expect(200);
    expect(agentOf("inside", "doomed")).toBeUndefined();
    await eventually(() => !existsSync(dir) && !isAlive(pid));
  });

  it("a DEPLOYED forced by the test hooks whose agent cannot start: 503 naming the sandbox, which is FAILED", async () => {
    await api.post("/v0/sandboxes", { metadata: { name: "forced-no-room" } }).expect(200);
    const force = (status: string) => request(sim.url).post("/_sim/transitions/step").send({ kind: "sandbox", name: "forced-no-room", status });
    await force("ARCHIVED").expect(200);
    expect(agentOf("forced-no-room")).toBeUndefined();
    launcher.refuse.add("forced-no-room");
    const res = await force("DEPLOYED").expect(503);
    expect(res.body.message).toMatch(/sandbox "forced-no-room".*forced DEPLOYED but its agent did not start: .*no room for forced-no-room/);
    const got = await api.get("/v0/sandboxes/forced-no-room").expect(200);
    expect(got.body.status).toBe("FAILED");
    expect(agentOf("forced-no-room")).toBeUndefined();
    launcher.refuse.delete("forced-no-room");
    await api.delete("/v0/sandboxes/forced-no-room").expect(200);
  });
});
