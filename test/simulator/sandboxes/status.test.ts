import { describe, expect, it } from "vitest";
import { recordAgentEvent } from "../../../simulator/sandboxes/status.js";
import { settle, type Deployable } from "../../../simulator/resources/lifecycle.js";
import { startTestSim } from "../../helpers/simulator.js";

/** The supervisor's reports become the sandbox's status and events, and nothing planned overrides them later. */
describe("recordAgentEvent", () => {
  it("a crash drops planned status moves, so a later read cannot turn a failed sandbox DEPLOYED", async () => {
    const sim = startTestSim();
    try {
      await sim.api.post("/v0/sandboxes", { metadata: { name: "box" } }).expect(200);
      const item = sim.deps.resources.get<Deployable>("default", "sandbox", "box")!;
      item.doc.__pending = [{ status: "DEPLOYED", atMs: sim.clock.now() + 500 }]; // as an update's redeploy plans it
      sim.deps.resources.update(item);
      recordAgentEvent(sim.deps, "default", "box", { type: "crashed", exit: { code: 1, signal: null, stderr: "boom\n" }, restartInMs: null, attempt: 9 });
      recordAgentEvent(sim.deps, "default", "box", { type: "gave-up", attempts: 8 });
      const after = sim.deps.resources.get<Deployable>("default", "sandbox", "box")!;
      expect(settle(after.doc, sim.clock.now() + 10_000)).toBe(false);
      const res = await sim.api.get("/v0/sandboxes/box").expect(200);
      expect(res.body.status).toBe("FAILED");
      expect(res.body.events.at(-2)).toMatchObject({ type: "agent", status: "FAILED", message: "sandbox agent crashed (exit code 1), not restarting: boom" });
      expect(res.body.events.at(-1)).toMatchObject({ status: "FAILED", message: "sandbox agent gave up after 8 failed restarts" });
    } finally {
      sim.close();
    }
  });
});
