import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { AGENT_PORT } from "./docker-args.js";
import type { Ran } from "./docker-cli.js";
import { exitOf } from "./docker.js";
import { SWARM_KIND, SWARM_LABELS } from "./swarm-args.js";
import type { SwarmFiles } from "./swarm-files.js";
import { liveServices, ownerGone } from "./swarm-owner.js";
import { inspectTasks, TERMINAL_STATES, type TaskStatus, type TaskWatcher } from "./swarm-tasks.js";
import type { AgentExit } from "./types.js";

/**
 * The swarm launcher's services once created (swarm.ts starts them): their removal (scaled to 0, the task's
 * layer committed as the sandbox's files, then removed), the settling of an agent's exit when its task ends,
 * and keeping the swarm consistent with the simulator's records: services a killed simulator left (their owner
 * gone) are removed before the first start, their files kept for the sandbox's next start; services of this
 * simulator it no longer tracks (a removal that failed while the manager was away) are swept.
 */

/** A sandbox's files across its tasks (docker-files.ts): `keep` cleared for a start that failed; `error` why they could not be kept. */
export interface SandboxFiles {
  rootDir: string;
  base: string;
  keep: boolean;
  error?: string;
}

type Run = (args: string[], env?: NodeJS.ProcessEnv, timeoutMs?: number) => Promise<Ran>;
interface Found {
  id: string;
  labels: Record<string, string>;
}

export class SwarmServices {
  constructor(
    private readonly run: Run,
    private readonly files: SwarmFiles,
    private readonly watcher: TaskWatcher,
    /** The running task of each sandbox root (cleared here when its task ends). */
    private readonly live: Map<string, { taskId: string; base: string }>,
    private readonly owner: string,
  ) {}

  /** This launcher's services the filter finds, with their labels. */
  async find(filter: string): Promise<Found[]> {
    const found = await this.run(["service", "ls", "--quiet", "--filter", filter]);
    const ids = found.stdout
      .split("\n")
      .map((s) => s.trim())
      .filter(Boolean);
    if (found.code !== 0 || ids.length === 0) return [];
    const labels = await this.run(["service", "inspect", "--format", "{{.ID}} {{json .Spec.Labels}}", ...ids]);
    return labels.stdout.split("\n").flatMap((line) => {
      const space = line.indexOf(" ");
      if (space < 0) return [];
      return [{ id: line.slice(0, space), labels: (JSON.parse(line.slice(space + 1)) as Record<string, string> | null) ?? {} }];
    });
  }

  /**
   * Removes the services found (those `pick` accepts), waiting until their tasks have stopped; a sandbox's
   * service (labelled with its root) has its files committed first, so its next start goes on from them.
   */
  async reap(filter: string, pick: (labels: Record<string, string>) => boolean = () => true): Promise<void> {
    const chosen = (await this.find(filter)).filter((s) => pick(s.labels));
    await Promise.all(
      chosen.map(({ id, labels }) => {
        const rootDir = labels[SWARM_LABELS.rootDir];
        const base = labels[SWARM_LABELS.baseImage];
        // A sandbox whose directory is gone (deleted, or another run's temp dir) has no files to keep.
        return this.remove(id, 10_000, undefined, rootDir && base && existsSync(rootDir) ? { rootDir, base, keep: true } : undefined);
      }),
    );
  }

  /** Before the first start: every sandbox service whose owner was a simulator of this host that is gone (killed). */
  reapOrphans(): Promise<void> {
    return this.reap(`label=${SWARM_LABELS.kind}=${SWARM_KIND}`, (labels) => ownerGone(labels[SWARM_LABELS.owner] ?? ""));
  }

  /**
   * Services of this simulator it does not track (their removal failed while the manager did not answer, or a
   * start gave up on one meanwhile): nothing will stop them, and their sandboxes have another service or none.
   */
  async sweep(): Promise<string[]> {
    const ours = await this.find(`label=${SWARM_LABELS.owner}=${this.owner}`);
    if (ours.length === 0) return [];
    const names = await this.run(["service", "inspect", "--format", "{{.ID}} {{.Spec.Name}}", ...ours.map((s) => s.id)]);
    const stray = names.stdout
      .split("\n")
      .map((l) => l.trim().split(" "))
      .filter(([id, name]) => id && name && !liveServices.has(name));
    await Promise.all(stray.map(([id]) => this.remove(id!, 1_000)));
    return stray.map(([, name]) => name!);
  }

  /**
   * Scales the service to 0 (its agent gets SIGTERM, then SIGKILL after the grace) and removes it once its task
   * has stopped, its layer committed first with `files`; resolves with the task's last status when it was seen.
   */
  async remove(service: string, graceMs: number, taskIds?: string[], files?: SandboxFiles): Promise<TaskStatus | undefined> {
    const ids =
      taskIds ??
      (await this.run(["service", "ps", "--quiet", "--no-trunc", service])).stdout
        .split("\n")
        .map((s) => s.trim())
        .filter(Boolean);
    await this.run(["service", "update", "--detach", "--replicas", "0", service]);
    const deadline = Date.now() + graceMs + 15_000;
    let last: TaskStatus[] = [];
    while (Date.now() < deadline) {
      last = await inspectTasks((a, t) => this.run(a, undefined, t), ids, AGENT_PORT);
      if (last.every((t) => TERMINAL_STATES.has(t.state))) break;
      await sleep(100);
    }
    const kept = files?.keep && last[0] ? await this.files.keep(last[0], files.rootDir, files.base) : undefined;
    if (files && kept?.error) files.error = kept.error;
    await this.run(["service", "rm", service]);
    await kept?.release?.();
    liveServices.delete(service);
    return last[0];
  }

  /** Settles once the task stopped (or its node went), with its exit code and last log lines; the service is then removed. */
  watch(service: string, taskId: string, files: SandboxFiles): Promise<AgentExit> {
    return new Promise<AgentExit>((resolve) => {
      this.watcher.watch(taskId, (task, reason, removed) => {
        void (async () => {
          const logs =
            task && !removed && task.state !== "shutdown"
              ? await this.run(["service", "logs", "--raw", "--tail", "40", service], undefined, 10_000)
              : undefined;
          // Ended by itself (a crash, not the launcher's stop): its files are kept where its node still answers.
          // (A task whose node went down is not asked: that node's engine is gone, and its files with it.)
          const kept = !removed && files.keep && task && TERMINAL_STATES.has(task.state) ? await this.files.keep(task, files.rootDir, files.base) : undefined;
          if (kept?.error) files.error = kept.error;
          if (this.live.get(files.rootDir)?.taskId === taskId) this.live.delete(files.rootDir);
          if (!removed) await this.run(["service", "rm", service]);
          await kept?.release?.();
          liveServices.delete(service);
          const exit = exitOf(task?.exitCode ?? null, `${logs ? `${logs.stderr}${logs.stdout}`.slice(-4096) : ""}`);
          // The swarm's reason last: the crash event shows the exit's last line.
          const lost = files.error ? `the sandbox's files could not be kept: ${files.error}\n` : "";
          resolve({ ...exit, stderr: `${exit.stderr}${exit.stderr && !exit.stderr.endsWith("\n") ? "\n" : ""}${lost}swarm: ${reason}` });
        })();
      });
    });
  }
}
