import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { isAlive, isSameProcessAlive, processStartTime, signalGroup } from "../../../sandbox-agent/process/os.js";

const hasProc = (() => {
  try {
    readFileSync("/proc/self/stat");
    return true;
  } catch {
    return false;
  }
})();
const state = (pid: number) => {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    return s.slice(s.lastIndexOf(")") + 2)[0];
  } catch {
    return undefined;
  }
};

describe("process liveness", () => {
  it("this process is alive; a pid that does not exist is not", () => {
    expect(isAlive(process.pid)).toBe(true);
    expect(isAlive(2 ** 22 + 12345)).toBe(false);
  });

  it.runIf(hasProc)("a zombie (exited, never reaped) counts as ended although kill(pid, 0) still succeeds", async () => {
    // `exec sleep` replaces the shell, so nobody reaps the background child: it stays a zombie for three seconds.
    const parent = spawn("/bin/sh", ["-c", "sleep 0 & echo $!; exec sleep 3"], { stdio: ["ignore", "pipe", "ignore"] });
    const zombie = await new Promise<number>((resolve) => parent.stdout!.once("data", (d: Buffer) => resolve(Number(d.toString().trim()))));
    for (let i = 0; i < 300 && state(zombie) !== "Z"; i++) await new Promise((r) => setTimeout(r, 10));
    expect(state(zombie)).toBe("Z");
    expect(() => process.kill(zombie, 0)).not.toThrow();
    expect(isAlive(zombie)).toBe(false);
    parent.kill("SIGKILL");
  });

  it.runIf(hasProc)("the kernel start time tells a process from a later one reusing its pid", () => {
    const start = processStartTime(process.pid);
    expect(start).toMatch(/^\d+$/);
    expect(processStartTime(process.pid)).toBe(start);
    expect(isSameProcessAlive(process.pid, start)).toBe(true);
    expect(isSameProcessAlive(process.pid, String(Number(start) + 1))).toBe(false);
  });

  it("signalGroup reports whether anything received the signal", async () => {
    const child = spawn("sleep", ["5"], { detached: true, stdio: "ignore" });
    const exited = new Promise((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
    expect(signalGroup(child.pid!, "SIGKILL")).toBe(true);
    expect(await exited).toBe("SIGKILL");
    expect(signalGroup(child.pid!, "SIGKILL")).toBe(false);
  });
});
