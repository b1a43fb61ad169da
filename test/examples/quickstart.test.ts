import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startSimulator, type StartedSimulator } from "../../index.js";
import { quickstart } from "../../examples/quickstart.js";

/** examples/quickstart.ts, run as a user would, against startSimulator() (the README's programmatic API). */
let sim: StartedSimulator;
beforeAll(async () => {
  sim = await startSimulator({ logLevel: "silent", imageSource: "host" });
  Object.assign(process.env, sim.env);
  delete process.env.BL_CLIENT_CREDENTIALS;
  delete process.env.BL_API_VERSION;
});
afterAll(async () => {
  await sim?.stop();
});

describe("examples/quickstart.ts", () => {
  it("creates a sandbox, moves 20 MiB both ways, execs, sees a schedule run, mounts a drive, cleans up", async () => {
    const lines: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk).trim());
      return true;
    });
    try {
      await quickstart();
    } finally {
      write.mockRestore();
    }
    expect(lines[0]).toMatch(/^created quickstart-\w+ \(DEPLOYED\) at http:\/\/127\.0\.0\.1:\d+\/sbx\/default\/quickstart-\w+$/);
    expect(lines).toContain("wrote and read back 20971520 bytes, identical");
    expect(lines).toContain("exec: hello from 20971520 bytes (exit 0)");
    // The agent really ran the scheduled command in the sandbox.
    expect(lines.some((l) => /^schedule \S+ \(at \S+\) executed: succeeded, wrote "scheduled"$/.test(l))).toBe(true);
    expect(lines.some((l) => /^drive mounted: \["quickstart-\w+-drive→\/mnt\/shared"\]$/.test(l))).toBe(true);
    expect(lines.at(-1)).toMatch(/^deleted quickstart-\w+$/);
  });
});
