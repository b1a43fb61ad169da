import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cmdlineOf, continueTree, descendantsOf, stateOf, stopTree } from "../../../simulator/launcher/proc.js";
import { eventually } from "./helpers.js";

/**
 * stopTree with real processes, by pid: a vfork() parent (dash, posix_spawn) whose child was stopped before its
 * exec sleeps in state D, which SIGSTOP cannot end. The program below makes that state on purpose: its vfork
 * child stops itself before exec'ing a sleep.
 */
const VFORK_PARENT = String.raw`
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  pid_t child = vfork();
  if (child == 0) {
    kill(getpid(), SIGSTOP);
    execl("/bin/sleep", "sleep", "300", (char *)0);
    _exit(127);
  }
  waitpid(child, 0, 0);
  return 0;
}
`;

const dir = mkdtempSync(join(tmpdir(), "proc-test-"));
const program = join(dir, "vfork-parent");
writeFileSync(`${program}.c`, VFORK_PARENT);
const cc = spawnSync(process.env.CC || "cc", ["-O0", "-o", program, `${program}.c`], { encoding: "utf8" });
const noCompiler = cc.status === 0 ? undefined : `no C compiler to build the vfork() parent: ${(cc.stderr || cc.error?.message || "").trim().split("\n")[0]}`;

const started: ChildProcess[] = [];
afterAll(() => {
  for (const child of started) {
    if (child.pid) for (const pid of [child.pid, ...descendantsOf(child.pid)]) process.kill(pid, "SIGKILL");
  }
  rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(noCompiler !== undefined)(`stopTree${noCompiler ? ` (skipped: ${noCompiler})` : ""}`, () => {
  it("stops a vfork() parent whose child was stopped before its exec, and the child past its exec", async () => {
    const parent = spawn(program, { stdio: "ignore" });
    started.push(parent);
    let child = 0;
    await eventually(() => {
      child = descendantsOf(parent.pid!)[0] ?? 0;
      return child !== 0 && stateOf(child) === "T" && stateOf(parent.pid!) === "D";
    });
    // Before: every SIGSTOP sent, then a wait for the parent that only a timeout ended.
    const stopped = await stopTree(parent.pid!, 5_000);
    expect(stateOf(parent.pid!)).toBe("T");
    const [running] = descendantsOf(parent.pid!);
    expect(running).toBe(child);
    expect(stateOf(running!)).toBe("T");
    expect(cmdlineOf(running!)).toEqual(["sleep", "300"]); // let go, it exec'd, then stopped again
    expect(stopped).toEqual(expect.arrayContaining([parent.pid!, child]));
    continueTree(parent.pid!);
    await eventually(() => stateOf(parent.pid!) === "S");
  });
});
