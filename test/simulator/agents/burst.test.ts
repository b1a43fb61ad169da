import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { ProcessLauncher } from "../../../simulator/launcher/index.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { eventually, isAlive } from "../launcher/helpers.js";

/**
 * Many sandboxes at once: a burst of creates on a busy machine makes creates slower, never failed. With two
 * starts at a time the others wait their turn as DEPLOYING (their events say how many are ahead), and each
 * agent's readiness deadline counts from when its own start began. The deadline here (4 s) is shorter than
 * 30 agents' starts sharing two cores at once would need, and longer than one start alone: without admission
 * control the last agents of the burst were killed for a deadline they missed only because of the others.
 */
const KEY = "burst-admin-key";
const BURST = 30;
let sim: ServedSimulator;
beforeAll(async () => {
  sim = await serveSimulator(
    { port: 0, imageSource: "host", apiKey: KEY, logLevel: "silent", startConcurrency: 2 },
    { launcher: new ProcessLauncher({ readyTimeoutMs: 4_000 }) },
  );
});
afterAll(async () => {
  await sim?.stop();
});

describe("a burst of creates with a low start concurrency", () => {
  it(`all ${BURST} end DEPLOYED with their agents answering; the queued ones said where they stood; none outlives the simulator`, async () => {
    const sdk = await sdkForSimulator(sim.env);
    const names = Array.from({ length: BURST }, (_, i) => `burst-${i}`);
    const sandboxes = await Promise.all(names.map((name) => sdk.SandboxInstance.create({ name })));
    expect(sandboxes.map((s) => s.status)).toEqual(names.map(() => "DEPLOYED"));
    const answers = await Promise.all(sandboxes.map((s) => s.process.exec({ command: `echo $((6 * 7))`, waitForCompletion: true })));
    expect(answers.map((a) => a.stdout?.trim())).toEqual(names.map(() => "42"));

    // The last of the burst waited: its events show its place in line before it became DEPLOYED.
    const res = await fetch(`${sim.url}/v0/sandboxes/${names[BURST - 1]}`, { headers: { authorization: `Bearer ${KEY}` } });
    const events = ((await res.json()) as { events: { status: string; message: string }[] }).events;
    const waits = events.filter((e) => e.message.startsWith("waiting to start"));
    expect(waits.length).toBeGreaterThan(0);
    expect(waits[0]!.status).toBe("DEPLOYING");
    expect(waits[0]!.message).toMatch(/^waiting to start: (\d+ sandboxes? ahead|next in line) \(\d+ starting\)$/);
    expect(events.at(-1)).toMatchObject({ status: "DEPLOYED" });
    expect(sim.agents.startQueue).toMatchObject({ concurrency: 2, running: 0, queued: 0 });

    const pids = names.map((n) => sim.agents.get("default", n)!.pid!);
    expect(pids.every((pid) => isAlive(pid))).toBe(true);
    await sim.stop();
    await eventually(() => pids.every((pid) => !isAlive(pid)));
    expect(pids.filter((pid) => isAlive(pid))).toEqual([]);
  }, 180_000);
});
