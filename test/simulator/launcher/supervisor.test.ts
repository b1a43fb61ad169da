import { rmSync, writeFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { AgentSupervisor, ProcessLauncher, type SupervisorEvent } from "../../../simulator/launcher/index.js";
import { eventually, specFor, tempBase } from "./helpers.js";

const base = tempBase("supervisor-");
const launcher = new ProcessLauncher();
const supervisors: AgentSupervisor[] = [];
afterAll(async () => {
  await Promise.all(supervisors.map((s) => s.stop()));
  rmSync(base, { recursive: true, force: true });
});

function supervise(name: string, options: ConstructorParameters<typeof AgentSupervisor>[2] = {}) {
  const events: SupervisorEvent[] = [];
  const sup = new AgentSupervisor(launcher, specFor(base, name), { initialDelayMs: 50, stopGraceMs: 2_000, ...options, onEvent: (e) => events.push(e) });
  supervisors.push(sup);
  return { sup, events };
}

describe("agent supervisor", () => {
  it("restarts a crashed agent and reports the crash and the restart", async () => {
    const { sup, events } = supervise("crashy");
    await sup.start();
    const firstPid = sup.pid!;
    expect(events.map((e) => e.type)).toEqual(["started"]);
    process.kill(firstPid, "SIGKILL");
    await eventually(() => events.some((e) => e.type === "restarted"));
    const crash = events.find((e) => e.type === "crashed");
    expect(crash).toMatchObject({ type: "crashed", exit: { signal: "SIGKILL" }, attempt: 1, restartInMs: 50 });
    expect(sup.state).toBe("running");
    expect(sup.pid).not.toBe(firstPid);
    expect((await fetch(`${sup.url}/health`)).status).toBe(200);
  });

  it("reports the agent down (no URL) between the crash and the restart", async () => {
    const { sup, events } = supervise("slow-restart", { initialDelayMs: 60_000 });
    await sup.start();
    process.kill(sup.pid!, "SIGKILL");
    await eventually(() => events.some((e) => e.type === "crashed"));
    expect(sup.state).toBe("restarting");
    expect(sup.url).toBeUndefined();
    await sup.stop(); // cancels the pending restart
    expect(sup.state).toBe("stopped");
  });

  it("gives up after maxAttempts failed restarts and says so", async () => {
    const { sup, events } = supervise("doomed", { maxAttempts: 1 });
    await sup.start();
    // Make every later start fail: the data dir becomes a file.
    rmSync(sup.spec.dataDir, { recursive: true, force: true });
    writeFileSync(sup.spec.dataDir, "not a directory");
    process.kill(sup.pid!, "SIGKILL");
    await eventually(() => events.some((e) => e.type === "gave-up"));
    expect(events.map((e) => e.type)).toEqual(["started", "crashed", "restart-failed", "gave-up"]);
    expect(sup.state).toBe("failed");
    expect(sup.url).toBeUndefined();
  });

  it("a stop is not a crash: no restart follows", async () => {
    const { sup, events } = supervise("stopped");
    await sup.start();
    await sup.stop();
    expect(events.map((e) => e.type)).toEqual(["started", "stopped"]);
    expect(events[1]).toMatchObject({ exit: { code: 0 } });
    expect(sup.state).toBe("stopped");
  });
});
