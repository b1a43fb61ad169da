import { describe, expect, it } from "vitest";
import { expiryOf, ttlMs } from "../../../simulator/sandboxes/expiry-rules.js";

/** Which limit expires a sandbox first, and when (pure: no clock, no agents). */
const CREATED = "2026-01-01T00:00:00.000Z";
const T0 = Date.parse(CREATED);
const HOUR = 3_600_000;
const doc = (spec: Record<string, unknown>) => ({ metadata: { createdAt: CREATED, updatedAt: CREATED }, spec });

describe("sandbox expiry", () => {
  it("reads the control plane's duration units, weeks included, and rejects the rest", () => {
    expect(ttlMs("30m")).toBe(30 * 60_000);
    expect(ttlMs("2w")).toBe(14 * 24 * HOUR);
    expect(ttlMs("1h30m")).toBe(1.5 * HOUR);
    expect(ttlMs("soon")).toBeUndefined();
    expect(ttlMs("")).toBeUndefined();
    expect(ttlMs(5)).toBeUndefined();
  });

  it("has no expiry without ttl, expires or policies", () => {
    expect(expiryOf(doc({ runtime: {} }))).toBeUndefined();
    expect(expiryOf(doc({ runtime: { ttl: "never" } }))).toBeUndefined();
  });

  it("spec.runtime.ttl counts from creation, spec.runtime.expires is a date; the earliest wins", () => {
    expect(expiryOf(doc({ runtime: { ttl: "2h" } }))).toMatchObject({ dueMs: T0 + 2 * HOUR, action: "delete", reason: "spec.runtime.ttl 2h reached" });
    const both = expiryOf(doc({ runtime: { ttl: "2h", expires: "2026-01-01T01:00:00Z" } }));
    expect(both).toMatchObject({ dueMs: T0 + HOUR, reason: "spec.runtime.expires 2026-01-01T01:00:00Z reached" });
  });

  it("ages count from the moment the sandbox was first ready when it has one; dates stay absolute", () => {
    const ready = new Date(T0 + 5_000).toISOString(); // a 5 s cold start
    const readyDoc = (spec: Record<string, unknown>) => ({ ...doc(spec), __readyAt: ready });
    expect(expiryOf(readyDoc({ runtime: { ttl: "1s" } }))?.dueMs).toBe(T0 + 6_000);
    expect(expiryOf(readyDoc({ lifecycle: { expirationPolicies: [{ type: "ttl-max-age", value: "1s" }] } }))?.dueMs).toBe(T0 + 6_000);
    expect(expiryOf(readyDoc({ lifecycle: { expirationPolicies: [{ type: "ttl-idle", value: "5s" }] } }))?.dueMs).toBe(T0 + 10_000);
    expect(expiryOf(readyDoc({ runtime: { expires: new Date(T0 + 2_000).toISOString() } }))?.dueMs).toBe(T0 + 2_000);
  });

  it("expiration policies: ttl-max-age from creation, date, ttl-idle from the last use", () => {
    const policies = (p: unknown[]) => doc({ lifecycle: { expirationPolicies: p } });
    expect(expiryOf(policies([{ type: "ttl-max-age", value: "1d", action: "delete" }]))?.dueMs).toBe(T0 + 24 * HOUR);
    expect(expiryOf(policies([{ type: "date", value: "2026-02-01T00:00:00Z", action: "delete" }]))?.dueMs).toBe(Date.parse("2026-02-01T00:00:00Z"));
    const idle = policies([{ type: "ttl-idle", value: "30m", action: "delete" }]);
    expect(expiryOf(idle)?.dueMs).toBe(T0 + 30 * 60_000);
    expect(expiryOf(idle, T0 + HOUR)?.dueMs).toBe(T0 + HOUR + 30 * 60_000);
    // An action the SDK's types do not name is not applied.
    expect(expiryOf(policies([{ type: "ttl-max-age", value: "1d", action: "archive" }]))).toBeUndefined();
  });

  it("writes the reason of the earliest limit only, and parses the same strings alike each time (memoized)", () => {
    const spec = {
      runtime: { ttl: "3h", expires: "2026-01-01T02:00:00Z" },
      lifecycle: { expirationPolicies: [{ type: "ttl-idle", value: "1h", action: "delete" }] },
    };
    const idle = expiryOf(doc(spec), T0 + 30 * 60_000);
    expect(idle).toMatchObject({ dueMs: T0 + 90 * 60_000, action: "delete", reason: "expiration policy ttl-idle 1h: idle since 2026-01-01T00:30:00.000Z" });
    expect(expiryOf(doc(spec), T0 + 30 * 60_000)?.dueMs).toBe(idle?.dueMs);
    expect(expiryOf(doc(spec), T0 + 2 * HOUR)).toMatchObject({ dueMs: T0 + 2 * HOUR, reason: "spec.runtime.expires 2026-01-01T02:00:00Z reached" });
    expect(expiryOf(doc({ lifecycle: { expirationPolicies: "not a list" } }))).toBeUndefined();
  });
});
