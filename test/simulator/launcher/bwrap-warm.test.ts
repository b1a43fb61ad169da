import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BwrapWarmPool, killWarmSandbox, type SpawnedSandbox } from "../../../simulator/launcher/bwrap-warm.js";
import { descendantsOf, isAlive, signal } from "../../../simulator/launcher/proc.js";
import { eventually, specFor, tempBase } from "./helpers.js";

/**
 * The bwrap launcher's warm pool stops a warm sandbox's whole process tree. Stood in for by a real process tree
 * shaped as bwrap is while it sets a sandbox up: an outer process whose child does not die with it (bwrap's
 * namespace init binds itself to the outer bwrap with --die-with-parent only once its setup is done; killed
 * before, the outer bwrap left the init behind, reparented to pid 1, as CI saw).
 */
const started: number[] = [];

function outerWithSurvivingChild(): SpawnedSandbox {
  const child: ChildProcess = spawn("/bin/sh", ["-c", "sleep 600 & wait"], { stdio: ["ignore", "pipe", "pipe", "ipc"] });
  started.push(child.pid!);
  return { child, network: async () => {}, setDirect: async () => {}, sandboxPid: () => undefined };
}

/** The outer process and its child, once the child is there. */
async function treeOf(sandbox: SpawnedSandbox): Promise<number[]> {
  const pid = sandbox.child.pid!;
  await eventually(() => descendantsOf(pid).length > 0);
  const tree = [pid, ...descendantsOf(pid)];
  started.push(...tree);
  return tree;
}

afterEach(() => {
  for (const pid of started.splice(0)) signal(pid, "SIGKILL");
});

describe("bwrap warm sandboxes are stopped with their whole process tree", () => {
  it("close() while a warm sandbox is still starting leaves none of its processes behind (checked by pid)", async () => {
    const spawned: SpawnedSandbox[] = [];
    const pool = new BwrapWarmPool(1, () => {
      const sandbox = outerWithSurvivingChild();
      spawned.push(sandbox);
      return sandbox;
    });
    pool.refill(specFor(join(tempBase("bwrap-warm-tree-"), "ws"), "prepared"));
    expect(spawned).toHaveLength(1);
    const tree = await treeOf(spawned[0]!);
    expect(tree.length).toBeGreaterThan(1);
    await pool.close(); // the item never said it was warm: it is still "starting"
    await eventually(() => tree.every((pid) => !isAlive(pid)));
    expect(tree.filter((pid) => isAlive(pid))).toEqual([]);
  });

  it("killWarmSandbox (a failed take-over) kills the outer process and what it started", async () => {
    const sandbox = outerWithSurvivingChild();
    const tree = await treeOf(sandbox);
    await killWarmSandbox(sandbox);
    await eventually(() => tree.every((pid) => !isAlive(pid)));
    expect(tree.filter((pid) => isAlive(pid))).toEqual([]);
  });
});
