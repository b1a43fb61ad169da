import { describe, expect, it } from "vitest";
import { PLANS, settle, startPlan, stepOnce, type Deployable } from "../../../simulator/resources/lifecycle.js";

describe("deployment status plans", () => {
  it("timed: one move per 500 ms, each with an event", () => {
    const doc: Deployable = {};
    startPlan(doc, PLANS.deploy, 0, "timed");
    expect(doc.status).toBe("UPLOADING");
    expect(settle(doc, 499)).toBe(false);
    expect(settle(doc, 1000)).toBe(true);
    expect(doc.status).toBe("DEPLOYING");
    settle(doc, 1500);
    expect(doc.status).toBe("DEPLOYED");
    expect(doc.events!.map((e) => [e.status, e.time])).toEqual([
      ["UPLOADING", "1970-01-01T00:00:00.000Z"],
      ["BUILDING", "1970-01-01T00:00:00.500Z"],
      ["DEPLOYING", "1970-01-01T00:00:01.000Z"],
      ["DEPLOYED", "1970-01-01T00:00:01.500Z"],
    ]);
    expect(doc.__pending).toBeUndefined();
  });

  it("immediate: the whole plan applies at once", () => {
    const doc: Deployable = {};
    startPlan(doc, PLANS.deactivate, 0, "immediate");
    expect(doc.status).toBe("DEACTIVATED");
  });

  it("manual: nothing moves with time, only steps", () => {
    const doc: Deployable = {};
    startPlan(doc, PLANS.deploy, 0, "manual");
    expect(settle(doc, 10 ** 12)).toBe(false);
    expect(stepOnce(doc, 5)).toBe(true);
    expect(doc.status).toBe("BUILDING");
  });
});
