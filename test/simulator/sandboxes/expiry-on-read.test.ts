import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { ProcessLauncher, type AgentHandle, type LaunchSpec, type Launcher } from "../../../simulator/launcher/index.js";
import { expireDueSandboxes } from "../../../simulator/sandboxes/expiry.js";

/**
 * Expiry is applied on every read, not only by the 5 s sweeper, and
 * the sweeper never turns a create into a 503. The simulator's clock is frozen
 * and moved by hand; the sweeper is called directly where the race needs it.
 * (npm run build first: the agents run from dist/.)
 */

/** A process launcher whose starts wait until released: the create is in flight for as long as the test needs. */
class GatedLauncher implements Launcher {
  readonly name = "gated";
  readonly #inner = new ProcessLauncher();
  #open = true;
  #waiting: (() => void)[] = [];
  hold(): void {
    this.#open = false;
  }
  release(): void {
    this.#open = true;
    for (const go of this.#waiting.splice(0)) go();
  }
  get waiting(): number {
    return this.#waiting.length;
  }
  async start(spec: LaunchSpec): Promise<AgentHandle> {
    if (!this.#open) await new Promise<void>((go) => this.#waiting.push(go));
    return this.#inner.start(spec);
  }
  close(): Promise<void> {
    return this.#inner.close?.() ?? Promise.resolve();
  }
}

const KEY = "expiry-on-read-key";
const launcher = new GatedLauncher();
let sim: ServedSimulator;
beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, testHooks: true, logLevel: "silent" }, { launcher });
  sim.deps.clock.freeze(true);
});
afterAll(async () => {
  launcher.release();
  await sim?.stop();
});

const auth = (r: request.Test) => r.set("x-blaxel-authorization", `Bearer ${KEY}`).set("x-blaxel-workspace", "default");
const get = (name: string) => auth(request(sim.url).get(`/v0/sandboxes/${name}`)).expect(200);

describe("sandbox expiry on read", () => {
  it("ttl 1s: the first GET after 1 s reads TERMINATED, without waiting for the sweeper; its URL answers 404 WORKLOAD_NOT_FOUND", async () => {
    await auth(request(sim.url).post("/v0/sandboxes"))
      .send({ metadata: { name: "one-second" }, spec: { runtime: { ttl: "1s" } } })
      .expect(200);
    expect((await get("one-second")).body.status).toBe("DEPLOYED");
    sim.deps.clock.advance(1_001);
    const read = await get("one-second");
    expect(read.body.status).toBe("TERMINATED");
    expect(read.body.events.at(-2).message).toContain("spec.runtime.ttl 1s");
    const list = await auth(request(sim.url).get("/v0/sandboxes?showTerminated=true")).expect(200);
    expect(JSON.stringify(list.body)).toContain("one-second");
    const url = await auth(request(sim.url).get("/sbx/default/one-second/filesystem/"));
    expect(url.status).toBe(404);
    expect(url.body.error.code).toBe("WORKLOAD_NOT_FOUND");
  });

  it("a list is a read too: a sandbox past its ttl is TERMINATED (hidden) in the first list after it", async () => {
    await auth(request(sim.url).post("/v0/sandboxes"))
      .send({ metadata: { name: "listed" }, spec: { runtime: { ttl: "1s" } } })
      .expect(200);
    sim.deps.clock.advance(2_000);
    const list = await auth(request(sim.url).get("/v0/sandboxes")).expect(200);
    expect(JSON.stringify(list.body)).not.toContain('"listed"');
    expect(sim.deps.resources.get("default", "sandbox", "listed")?.status).toBe("TERMINATED");
  });

  it("a sweep while the create is in flight leaves it alone: the create answers 200 DEPLOYED, and the ttl counts from then", async () => {
    launcher.hold();
    const creating = auth(request(sim.url).post("/v0/sandboxes"))
      .send({ metadata: { name: "raced" }, spec: { runtime: { ttl: "1s" } } })
      .then((r) => r);
    for (let i = 0; i < 500 && launcher.waiting === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(launcher.waiting).toBe(1);
    sim.deps.clock.advance(5_000); // the ttl has long passed while the agent is still starting
    expect(expireDueSandboxes(sim.deps)).toEqual([]);
    expect((await get("raced")).body.status).toBe("DEPLOYING");
    launcher.release();
    const created = await creating;
    expect(created.status).toBe(200);
    expect(created.body.status).toBe("DEPLOYED");
    // The cold start did not eat the lifetime: a whole second is left from the moment the create answered.
    const after = await get("raced");
    expect(after.body).toMatchObject({ status: "DEPLOYED", expiresIn: 1 });
    sim.deps.clock.advance(1_000);
    expect((await get("raced")).body.status).toBe("TERMINATED");
  });

  it("an unknown sandbox's URL is 404 WORKLOAD_NOT_FOUND, an unknown workspace's 404 WORKSPACE_NOT_FOUND (edge shape, X-Blaxel-Error-Code)", async () => {
    const unknown = await auth(request(sim.url).get("/sbx/default/never-made/filesystem/"));
    expect(unknown.status).toBe(404);
    expect(unknown.headers["x-blaxel-error-code"]).toBe("WORKLOAD_NOT_FOUND");
    expect(unknown.body.error).toMatchObject({ code: "WORKLOAD_NOT_FOUND", status: 404, retryable: false });
    const noWorkspace = await auth(request(sim.url).get("/sbx/nowhere/box/filesystem/"));
    expect(noWorkspace.status).toBe(404);
    expect(noWorkspace.body.error.code).toBe("WORKSPACE_NOT_FOUND");
  });
});
