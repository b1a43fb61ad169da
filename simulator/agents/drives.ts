import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { tempPathBeside } from "../../src/atomic-file.js";
import { ACCESS_DIR } from "../../sandbox-agent/drives/access.js";
import { errors } from "../../src/errors.js";
import { callAgent } from "./client.js";
import type { SandboxAgents } from "./registry.js";

/**
 * The drive resource's files: drive N of workspace W is the directory
 * <simulator dir>/drives/W/N, which every sandbox agent of W sees as its
 * --drives-dir (with --drives-existing-only, so a drive that is not a
 * control-plane resource cannot be mounted).
 */

export function driveDir(agents: SandboxAgents, workspace: string, drive: string): string {
  return join(agents.drivesDir(workspace), drive);
}

/**
 * Creates the drive's directory (idempotent: an update or a re-create keeps
 * its files) and writes its permissions where the workspace's agents read
 * them at mount time (sandbox-agent/drives/access.ts).
 */
export function provisionDrive(agents: SandboxAgents, workspace: string, drive: string, permissions: unknown[] = []): void {
  mkdirSync(driveDir(agents, workspace, drive), { recursive: true, mode: 0o755 });
  writeAccessFile(join(agents.drivesDir(workspace), ACCESS_DIR, "drives", `${drive}.json`), { permissions });
}

/** A sandbox's labels, which drive permissions match (written on create and on every update). */
export function recordWorkloadLabels(agents: SandboxAgents, workspace: string, sandbox: string, labels: Record<string, unknown> | undefined): void {
  writeAccessFile(join(agents.drivesDir(workspace), ACCESS_DIR, "sandboxes", `${sandbox}.json`), { labels: labels ?? {} });
}

export function forgetWorkload(agents: SandboxAgents, workspace: string, sandbox: string): void {
  rmSync(join(agents.drivesDir(workspace), ACCESS_DIR, "sandboxes", `${sandbox}.json`), { force: true });
}

/** Temp file and rename: an agent reading at mount time sees the old file or the new one, never half of one. */
function writeAccessFile(path: string, content: unknown): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  const tmp = tempPathBeside(path);
  writeFileSync(tmp, JSON.stringify(content), { mode: 0o644 });
  renameSync(tmp, path);
}

/**
 * Before a drive resource is deleted: asks every running agent of the
 * workspace what it has mounted; a drive still mounted somewhere is a 409
 * naming the sandbox and mount path, an agent that cannot answer a 503
 * naming its sandbox. Otherwise the drive's files are removed.
 */
export async function retireDrive(agents: SandboxAgents, workspace: string, sandboxes: string[], drive: string): Promise<void> {
  const running = sandboxes.filter((s) => agents.get(workspace, s) !== undefined);
  const answers = await Promise.all(
    running.map(async (sandbox) => {
      const { mounts } = await callAgent<{ mounts: { driveName: string; mountPath: string }[] }>(agents, workspace, sandbox, { path: "/drives/mount" });
      return mounts.filter((m) => m.driveName === drive).map((m) => `sandbox "${sandbox}" at ${m.mountPath}`);
    }),
  );
  const users = answers.flat();
  if (users.length > 0) throw errors.conflict(`drive "${drive}" is mounted in ${users.join(", ")}: unmount it first`);
  rmSync(driveDir(agents, workspace, drive), { recursive: true, force: true });
  rmSync(join(agents.drivesDir(workspace), ACCESS_DIR, "drives", `${drive}.json`), { force: true });
}
