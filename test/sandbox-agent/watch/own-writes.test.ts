import { describe, expect, it } from "vitest";
import { FakeClock } from "../../../src/clock.js";
import { OwnWrites } from "../../../sandbox-agent/paths/own-writes.js";

describe("OwnWrites", () => {
  it("knows a temp name while its write is in flight and for 30 s after, then forgets it", () => {
    const clock = new FakeClock();
    const own = new OwnWrites(clock);
    const done = own.begin(".abc.tmp");
    expect(own.has(".abc.tmp")).toBe(true);
    clock.advance(3_600_000); // a long upload: still in flight
    expect(own.has(".abc.tmp")).toBe(true);
    done();
    clock.advance(29_999);
    expect(own.has(".abc.tmp")).toBe(true);
    clock.advance(1);
    expect(own.has(".abc.tmp")).toBe(false);
    expect(own.has("user.txt")).toBe(false);
  });
  it("sweeps finished names once many are remembered, keeping those in flight", () => {
    const clock = new FakeClock();
    const own = new OwnWrites(clock);
    const inFlight = own.begin(".long.tmp");
    for (let i = 0; i < 1_500; i++) own.begin(`.${i}.tmp`)();
    clock.advance(30_000);
    own.begin(".new.tmp");
    expect(own.size).toBeLessThan(600);
    expect(own.has(".long.tmp")).toBe(true);
    inFlight();
  });
});
