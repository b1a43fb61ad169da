import { describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { uuidV7 } from "../../../sandbox-agent/schedules/execution-ids.js";

describe("uuidV7 execution ids", () => {
  it("are RFC 9562 version-7 uuids carrying the clock's millisecond", () => {
    const clock = new FakeClock("2026-05-01T12:00:00.123Z");
    const id = uuidV7(clock)();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(clock.now());
  });

  it("sort in creation order, within one millisecond and when the clock steps back", () => {
    const clock = new FakeClock();
    const next = uuidV7(clock);
    const ids: string[] = [];
    for (let i = 0; i < 5_000; i++) ids.push(next()); // more than the 4096 a millisecond's counter holds
    clock.advance(5);
    ids.push(next());
    clock.set(clock.now() - 60_000);
    ids.push(next());
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
