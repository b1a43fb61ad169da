import { afterAll, describe, expect, it } from "vitest";
import { ImageUploads } from "../../simulator/sandboxes/image-uploads.js";
import { allOperations } from "../../simulator/operations.js";
import { openSimulator } from "../../simulator/root.js";
import { sdkOperationNames } from "../helpers/sdk-operations.js";

const sdkFunctions = sdkOperationNames();
// The table is built from a records-only simulator's dependencies (each route module takes its own).
const sim = openSimulator();
afterAll(() => sim.close());

describe("operations table", () => {
  it("serves every control-plane operation of @blaxel/core's sdk.gen, each once", () => {
    const ids = allOperations(sim.deps, new ImageUploads(undefined)).map((o) => o.id);
    expect(sdkFunctions.length).toBeGreaterThanOrEqual(170);
    expect(sdkFunctions.filter((f) => !ids.includes(f))).toEqual([]);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
  });

  it("has no route shadowed by an earlier one", () => {
    const seen = new Set<string>();
    for (const op of allOperations(sim.deps, new ImageUploads(undefined))) {
      const key = `${op.method} ${op.path.replace(/:[A-Za-z]+/g, ":p")}`;
      expect(seen.has(key), key).toBe(false);
      seen.add(key);
    }
  });
});
