import { existsSync } from "node:fs";
import { errors } from "../../src/errors.js";
import { settledWithin } from "../../src/settled.js";
import { agentFetch } from "../launcher/endpoint.js";
import { removeTree } from "../launcher/types.js";

import { mountsUnder } from "../../src/mounts.js";
import { removeWorkspaceVolumes } from "./volumes.js";
import { key, SandboxAgentsState, type Entry } from "./registry-state.js";

/**
 * The end of a sandbox's agent: stop (files kept), retire (a delete: files moved aside for the retention
 * period), a workspace's deletion, and the simulator's shutdown (stopAll, then killAll when forced). Drives
 * are unmounted through the agent first: a bind mount would outlive it.
 */
export abstract class SandboxAgentsLifecycle extends SandboxAgentsState {
  /**
   * Delete: unmounts the sandbox's drives (a bind mount would outlive its
   * agent), stops the agent (SIGTERM, then SIGKILL), and moves its files
   * aside until the retention period ends (removed by the sweeper; at once
   * with retention 0). Errors are reported, not thrown.
   */
  retire(workspace: string, sandbox: string, onError: (err: Error) => void = () => {}): void {
    const k = key(workspace, sandbox);
    const entry = this.running.get(k);
    this.lastUsed.delete(k);
    this.running.delete(k); // from now on the name is free: a new start waits for this retirement
    const previous = this.retiring.get(k) ?? Promise.resolve();
    const done: Promise<void> = previous
      .then(async () => {
        if (entry) {
          await this.standby?.wake(k, entry.supervisor); // its agent unmounts the drives: it runs again first
          this.standby?.remove(k);
          await unmountDrives(entry).catch((err: Error) =>
            this.options.logger?.warn({ workspace, sandbox, err: err.message }, "could not unmount the sandbox's drives"),
          );
          await entry.supervisor.stop();
        }
        const dir = this.sandboxDir(workspace, sandbox);
        if (!existsSync(dir)) return;
        const retention = this.options.retentionMs ?? 0;
        this.retired.retire(workspace, sandbox, dir, (this.options.now ?? Date.now)() + retention);
        if (retention <= 0) this.retired.sweep();
      })
      .catch(onError)
      .finally(() => {
        if (this.retiring.get(k) === done) this.retiring.delete(k);
      });
    this.retiring.set(k, done);
  }

  /**
   * Stops the agent (SIGTERM, then SIGKILL); its files stay (archive,
   * deactivate, a restart with a new environment). Its drives are unmounted
   * first: a bind mount would outlive its agent.
   */
  async stop(workspace: string, sandbox: string): Promise<void> {
    const entry = this.running.get(key(workspace, sandbox));
    if (!entry) return;
    this.running.delete(key(workspace, sandbox));
    await entry.ready;
    await this.standby?.wake(key(workspace, sandbox), entry.supervisor); // its agent unmounts the drives: it runs again first
    this.standby?.remove(key(workspace, sandbox));
    await unmountDrives(entry).catch((err: Error) =>
      this.options.logger?.warn({ workspace, sandbox, err: err.message }, "could not unmount the sandbox's drives"),
    );
    await entry.supervisor.stop();
  }

  /** Workspace deletion: every sandbox's agent is stopped and retired, then the workspace's drives are removed. */
  retireWorkspace(workspace: string, sandboxes: string[], onError: (err: Error) => void = () => {}): Promise<void> {
    for (const sandbox of sandboxes) this.retire(workspace, sandbox, onError);
    const pending = sandboxes.map((s) => this.retiring.get(key(workspace, s))).filter((p): p is Promise<void> => p !== undefined);
    return Promise.allSettled(pending).then(() => {
      try {
        const left = mountsUnder(this.drivesDir(workspace));
        if (left.length > 0) throw new Error(`drives of workspace "${workspace}" still mounted (${left.join(", ")})`);
        removeTree(this.drivesDir(workspace), this.options.launcher);
        removeWorkspaceVolumes(this.options.dir, workspace);
        this.snapshots.removeWorkspace(workspace);
      } catch (err) {
        onError(err as Error);
      }
    });
  }

  /**
   * Removes a stopped sandbox's files. Refuses while anything is mounted
   * under it: deleting through a bind-mounted drive would delete the drive's files.
   */
  removeFiles(workspace: string, sandbox: string): void {
    if (this.running.has(key(workspace, sandbox))) throw errors.conflict(`sandbox "${sandbox}" is still running`);
    const dir = this.sandboxDir(workspace, sandbox);
    const mounted = mountsUnder(dir);
    if (mounted.length > 0) throw errors.conflict(`sandbox "${sandbox}" still has mounts (${mounted.join(", ")}): unmount its drives first`);
    removeTree(dir, this.options.launcher);
  }

  /**
   * The simulator's shutdown: every agent stops at once (SIGTERM, SIGKILL after `graceMs`), without waiting
   * for starts or deletions in progress beyond `deadlineMs`; whatever is still starting then is left to die
   * with the simulator (the launcher's processes end with their parent).
   */
  async stopAll(graceMs = 3_000, deadlineMs = 6_000): Promise<void> {
    this.retired.stopSweeping();
    this.standby?.close();
    const entries = [...this.running.entries()];
    // Sleeping sandboxes go on first: their agents unmount drives and take SIGTERM.
    await Promise.all(entries.map(([k, entry]) => this.standby?.wake(k, entry.supervisor)));
    this.running.clear();
    this.shuttingDown = entries.map(([, entry]) => entry.supervisor);
    const stops = entries.map(async ([k, entry]) => {
      await unmountDrives(entry, 2_000).catch((err: Error) =>
        this.options.logger?.warn({ sandbox: k, err: err.message }, "could not unmount the sandbox's drives"),
      );
      await entry.supervisor.stop(graceMs);
    });
    const late = await settledWithin([...stops, ...this.retiring.values()], deadlineMs);
    if (late > 0)
      this.options.logger?.warn({ sandboxes: late, deadlineMs }, "shutdown: sandboxes still stopping or starting are left to end with the simulator");
    await settledWithin([this.options.launcher.close?.()], 2_000);
  }

  /**
   * A forced exit (a second signal, or a shutdown past its deadline): SIGKILL to every agent's process now,
   * synchronously, so nothing writes into the sandboxes' files while they are removed. Their sandboxes end
   * with them (the isolating launcher's processes die with their parent).
   */
  killAll(): void {
    for (const supervisor of [...[...this.running.values()].map((e) => e.supervisor), ...this.shuttingDown]) {
      const pid = supervisor.pid;
      if (pid === undefined) continue;
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
}

/** Lazily unmounts every drive the agent has mounted (DELETE /drives/mount/{path}?force=true). */
async function unmountDrives(entry: Entry, timeoutMs = 5_000): Promise<void> {
  const endpoint = entry.supervisor.endpoint;
  if (!endpoint) return;
  const headers = { authorization: `Bearer ${entry.token}` };
  const res = await agentFetch(endpoint, { path: "/drives/mount", headers, timeoutMs });
  if (res.status !== 200) throw new Error(`GET /drives/mount answered ${res.status}`);
  const { mounts } = JSON.parse(res.text) as { mounts: { mountPath: string }[] };
  for (const m of mounts) {
    await agentFetch(endpoint, {
      method: "DELETE",
      path: `/drives/mount/${encodeURIComponent(m.mountPath.replace(/^\/+/, ""))}?force=true`,
      headers,
      timeoutMs: 10_000,
    });
  }
}
