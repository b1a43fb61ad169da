import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openDatabase } from "../../../src/sqlite.js";
import { UsageStore, type UsageEvent } from "../../../simulator/metrics/usage-store.js";

const ev = (over: Partial<UsageEvent> = {}): UsageEvent => ({
  ts: Date.parse("2026-04-01T10:00:00Z"),
  workspace: "ws-a",
  resourceType: "sandbox",
  resourceName: "box",
  resourceUuid: "u-box",
  billingDimension: "sandbox_compute_runtime_gbs",
  usage: 3600,
  ...over,
});
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe("UsageStore", () => {
  it("keeps events, identities and price overrides in the --data file across a reopen", () => {
    const dir = mkdtempSync(join(tmpdir(), "metrics-"));
    dirs.push(dir);
    const file = join(dir, "sim.db");
    const a = new UsageStore(openDatabase(file));
    a.setPrices({ volume_storage_gbs: 1 });
    a.record([ev()]);
    a.db.close();
    const b = new UsageStore(openDatabase(file));
    expect(b.prices().volume_storage_gbs!.usdPerUnit).toBe(1);
    expect(() => b.record([ev({ resourceName: "renamed" })])).toThrow(/already recorded/);
    expect(b.db.prepare("SELECT COUNT(*) FROM metrics_usage_events").pluck().get()).toBe(1);
    expect(b.db.prepare("SELECT cost_nanos FROM metrics_daily_workspace").pluck().get()).toBe(30_000_000);
    b.db.close();
  });

  it("rolls a failed batch back entirely, interned names included", () => {
    const store = new UsageStore(openDatabase(":memory:"));
    // Make the insert fail inside the transaction after new names were interned.
    store.db.exec("CREATE TRIGGER boom BEFORE INSERT ON metrics_usage_events WHEN NEW.usage = 13 BEGIN SELECT RAISE(ABORT, 'boom'); END");
    expect(() => store.record([ev({ resourceUuid: "u-new", resourceName: "new", workspace: "ws-new" }), ev({ usage: 13 })])).toThrow(/boom/);
    expect(store.db.prepare("SELECT COUNT(*) FROM metrics_workspaces").pluck().get()).toBe(0);
    expect(store.workspaceIds(["ws-new"])).toEqual([]);
    store.db.exec("DROP TRIGGER boom");
    store.record([ev({ resourceUuid: "u-new", resourceName: "new", workspace: "ws-new" })]);
    expect(store.workspaceIds(["ws-new"])).toHaveLength(1);
  });

  it("refuses an event costing more than a million dollars, and clear() forgets everything", () => {
    const store = new UsageStore(openDatabase(":memory:"));
    store.setPrices({ sandbox_compute_runtime_gbs: 1000 });
    expect(() => store.record([ev({ usage: 1001 })])).toThrow(/usage: one event may cost at most 1000000 USD/);
    store.record([ev({ usage: 1 })]);
    store.clear();
    expect(store.prices().sandbox_compute_runtime_gbs!.overridden).toBe(false);
    expect(
      store.db
        .prepare(
          "SELECT (SELECT COUNT(*) FROM metrics_usage_events) + (SELECT COUNT(*) FROM metrics_daily_resource) + (SELECT COUNT(*) FROM metrics_resources)",
        )
        .pluck()
        .get(),
    ).toBe(0);
    store.record([ev({ workspace: "ws-b" })]); // the uuid is free again
  });
});

describe("UsageStore.record from the simulator's own calls", () => {
  it("refuses a time or a usage that is not a number in range", () => {
    const store = new UsageStore(openDatabase(":memory:"));
    expect(() => store.record([ev({ ts: Number.NaN })], "usage")).toThrow("usage[0].timestamp: out of range");
    expect(() => store.record([ev({ ts: -1 })], "usage")).toThrow("usage[0].timestamp: out of range");
    expect(() => store.record([ev({ usage: Number.POSITIVE_INFINITY })], "usage")).toThrow("usage[0].usage: expected a finite number >= 0");
    expect(() => store.record([ev({ usage: -2 })], "usage")).toThrow("usage[0].usage");
    expect(store.db.prepare("SELECT COUNT(*) FROM metrics_usage_events").pluck().get()).toBe(0);
  });
});
