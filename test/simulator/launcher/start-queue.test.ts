import { describe, expect, it } from "vitest";
import { StartQueue } from "../../../simulator/launcher/start-queue.js";

/** Admission control's bookkeeping, without processes: slots, arrival order, and where each waiting start stands. */
function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("StartQueue", () => {
  it("runs at most `concurrency` starts at once and admits the rest in arrival order", async () => {
    const queue = new StartQueue(2);
    const gates = Array.from({ length: 5 }, deferred);
    const began: number[] = [];
    const runs = gates.map((gate, i) =>
      queue.run(async () => {
        began.push(i);
        await gate.promise;
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(began).toEqual([0, 1]);
    expect([queue.running, queue.queued]).toEqual([2, 3]);
    gates[1]!.resolve();
    await runs[1];
    await new Promise((r) => setImmediate(r));
    expect(began).toEqual([0, 1, 2]);
    gates[0]!.resolve();
    gates[2]!.resolve();
    await Promise.all([runs[0], runs[2]]);
    await new Promise((r) => setImmediate(r));
    expect(began).toEqual([0, 1, 2, 3, 4]);
    gates[3]!.resolve();
    gates[4]!.resolve();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3, 4]);
    expect([queue.running, queue.queued]).toEqual([0, 0]);
  });

  it("tells a waiting start how many are ahead of it, and again as it moves up", async () => {
    const queue = new StartQueue(1);
    const gate = deferred();
    const seen: Record<string, number[]> = { b: [], c: [] };
    const a = queue.run(() => gate.promise);
    const b = queue.run(
      async () => {},
      (ahead) => seen.b!.push(ahead),
    );
    const c = queue.run(
      async () => {},
      (ahead) => seen.c!.push(ahead),
    );
    expect(seen).toEqual({ b: [0], c: [1] });
    gate.resolve();
    await Promise.all([a, b, c]);
    expect(seen).toEqual({ b: [0], c: [1, 0] });
  });

  it("a start that fails frees its slot", async () => {
    const queue = new StartQueue(1);
    await expect(queue.run(async () => Promise.reject(new Error("no room")))).rejects.toThrow("no room");
    expect(await queue.run(async () => "next")).toBe("next");
    expect(queue.running).toBe(0);
  });

  it("refuses a concurrency that is not a whole number of at least 1", () => {
    expect(() => new StartQueue(0)).toThrow(RangeError);
    expect(() => new StartQueue(1.5)).toThrow(RangeError);
  });
});
