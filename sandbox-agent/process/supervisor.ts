import { randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";
import { errors } from "../../src/errors.js";
import { capWhileGroupLives } from "./linger.js";
import { LiveOutput } from "./live-output.js";
import { groupAlive, isSameProcessAlive, preferOomVictim, processStartTime, signalGroup } from "./os.js";
import { LogFiles, STREAMS, truncationMarker, type StreamName } from "./output.js";
import { exitMeaning, takeExitRecord, toRecord, writeExitRecord } from "./record.js";
import { shellFor, spawnHere, type SpawnedRun } from "./spawn.js";
import { StdinPipe } from "./stdin.js";
import type { ProcessRow, ProcessStatus, ProcessStore } from "./process-store.js";
import type { ProcessManagerOptions, ProcessOutput, ProcessRecord, StartProcessRequest } from "./types.js";
import {
  ADOPTED_POLL_MS,
  EXIT_RECORD_WAIT_POLLS,
  inheritedEnv,
  mayRestart,
  newProcessRow,
  OOM_KILLED,
  RESTART_DELAY_MS,
  STDIN_STALL_MS,
  type Running,
} from "./running.js";

/** A run's in-memory state (running.ts), importable from here as before. */
export type { Running } from "./running.js";

/**
 * The life of each run the manager watches: spawn, follow the exit, restart
 * a failed run that asked for it, kill at the kill timer, record the end and
 * wake the waiters. ProcessManager is the API in front of it.
 */
export class Supervisor {
  readonly #o: ProcessManagerOptions;
  readonly #store: ProcessStore;
  readonly #running = new Map<string, Running>();
  /** Cap timers for ended processes whose background children still write to the output files. */
  readonly #lingering = new Set<{ stop(): void }>();
  /** spawn() blocks the event loop for a fork; this chain gives each its own loop turn. */
  #spawnTurns: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(options: ProcessManagerOptions, store: ProcessStore) {
    this.#o = options;
    this.#store = store;
  }

  /** The watched state of a record, while it runs. */
  running(id: string): Running | undefined {
    return this.#running.get(id);
  }

  /** Stops watching; pending waits are rejected with 503. */
  /**
   * Stops watching. `handOver` (an upgrade: this process lives on as the new agent's keeper, still the
   * parent of the commands it started): their exits are written beside their logs for the new agent,
   * which adopts them, so their exit codes survive the upgrade.
   */
  close(handOver = false): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const running of this.#running.values()) {
      for (const t of running.timers) t.cancel();
      running.killTimer?.cancel();
      running.restart?.cancel();
      if (running.poll) clearInterval(running.poll);
      running.child?.removeAllListeners("exit");
      if (handOver) running.child?.once("exit", (code, signal) => writeExitRecord(this.#o.logDir, running.row.id, code, signal));
      running.output.abandon();
      for (const w of running.waiters) w.reject(errors.serviceUnavailable("the agent is shutting down"));
    }
    this.#running.clear();
    for (const linger of this.#lingering) linger.stop();
    this.#lingering.clear();
  }

  /**
   * Node forks synchronously (a few ms for a process of the agent's size), so
   * a burst of starts — a thousand `at` schedules due the same second — would
   * stall timers and requests for seconds. One spawn per event-loop turn lets
   * them run in between.
   */
  spawnTurn(): Promise<void> {
    const turn = this.#spawnTurns.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
    this.#spawnTurns = turn;
    return turn;
  }

  #base(): NodeJS.ProcessEnv {
    return typeof this.#o.baseEnv === "function" ? this.#o.baseEnv() : (this.#o.baseEnv ?? process.env);
  }

  #env(custom: Record<string, string> | undefined): NodeJS.ProcessEnv {
    return { ...inheritedEnv(this.#base()), ...custom };
  }

  async spawnNew(input: StartProcessRequest, name: string, workingDir: string, cwd: string): Promise<ProcessRecord> {
    const files = new LogFiles(this.#o.logDir, randomUUID());
    const stdin = input.stdin ?? false;
    let run: SpawnedRun;
    try {
      run = await this.#spawn(
        {
          command: input.command,
          cwd,
          workingDir,
          env: this.#env(input.env),
          shell: shellFor(this.#base(), this.#o.spawner === undefined),
          stdin,
          wrapper: this.#o.wrapper,
        },
        files,
      );
    } catch (err) {
      await files.remove();
      throw errors.unprocessable(`failed to start process: ${(err as Error).message}`);
    }
    const row = newProcessRow(files.id, run, name, input, workingDir, stdin, this.#o.clock.now());
    this.#store.insert(row);
    const running = this.#track(row, files);
    running.spec = { command: input.command, cwd, workingDir, env: input.env };
    this.#attach(running, run);
    this.#o.logger.info({ processPid: row.pid, processName: name, workingDir, killAfter: row.killAfter }, "process started");
    return toRecord(row);
  }

  #spawn(spec: Parameters<typeof spawnHere>[0], files: LogFiles): Promise<SpawnedRun> {
    return (this.#o.spawner ?? spawnHere)(spec, files);
  }

  /** Follows a run's exit and takes its stdin pipe. */
  #attach(running: Running, run: SpawnedRun): void {
    const { child } = run;
    running.child = child;
    running.oomKillsAtStart = this.#o.oomKills?.();
    // Under a memory limit the command, not the agent, should be the OOM killer's choice (raising needs no privilege).
    if (running.oomKillsAtStart !== undefined) preferOomVictim(run.pid);
    child.on("error", (err) => this.#o.logger.error({ err, processPid: child.pid }, "process error"));
    if (child.stdin) {
      running.stdin = new StdinPipe(child.stdin, this.#o.clock, STDIN_STALL_MS);
      if (running.stdinClosed) running.stdin.close();
    }
    // A spawner that reads a report before resolving (ns-spawn.ts) can hand over a child that has already ended:
    // its "exit" was emitted before anyone listened.
    if (child.exitCode !== null || child.signalCode !== null) void this.#ended(running, child.exitCode, child.signalCode);
    else child.once("exit", (code, signal) => void this.#ended(running, code, signal));
  }

  adopt(row: ProcessRow): void {
    const files = new LogFiles(this.#o.logDir, row.id);
    const running = this.#track(row, files, true);
    let goneFor = 0;
    running.poll = setInterval(() => {
      if (isSameProcessAlive(row.runPid, row.procStart)) return;
      // Its parent (the agent this one replaced, kept as a keeper) records its exit just after reaping it.
      const known = takeExitRecord(this.#o.logDir, row.id);
      if (known) void this.#ended(running, known.code, known.signal, true);
      else if (++goneFor >= EXIT_RECORD_WAIT_POLLS) void this.#ended(running, null, null);
    }, ADOPTED_POLL_MS);
    running.poll.unref();
    this.#o.logger.info({ processPid: row.pid, processName: row.name }, "process adopted after agent restart");
  }

  #track(row: ProcessRow, files: LogFiles, adopted = false): Running {
    const output = new LiveOutput(files, {
      capBytes: this.#o.logMaxBytes,
      dropped: { stdout: row.stdoutDropped, stderr: row.stderrDropped },
      offsets: adopted ? undefined : { stdout: 0, stderr: 0 },
      onDropped: (d) => {
        if (!this.#closed) this.#store.setDropped(row.id, d.stdout, d.stderr);
      },
    });
    const running: Running = { row, output, timers: [], waiters: [] };
    this.#running.set(row.id, running);
    this.#armKillTimer(running);
    return running;
  }

  /** keepAlive with a timeout, and schedules: kill the group `killAfter` seconds after the (latest) start. */
  #armKillTimer(running: Running): void {
    const { row } = running;
    running.killTimer?.cancel();
    if (row.killAfter <= 0) return;
    const left = row.startedAt + row.killAfter * 1000 - this.#o.clock.now();
    running.killTimer = this.#o.clock.setTimer(left, () => {
      this.#o.logger.info({ processPid: row.pid, processName: row.name, killAfter: row.killAfter }, "process timed out: killing its group");
      const reason = { status: "killed" as const, error: `timed out after ${row.killAfter} seconds` };
      if (this.endBetweenRuns(running, reason)) return;
      if (signalGroup(row.runPid, "SIGKILL")) running.endReason = reason;
    });
  }

  async #ended(running: Running, code: number | null, signal: NodeJS.Signals | null, exitKnown = false): Promise<void> {
    if (this.#closed || this.#running.get(running.row.id) !== running) return;
    if (running.poll) clearInterval(running.poll);
    running.poll = undefined;
    running.child?.stdin?.destroy(); // the run is over: free the pipe's descriptor (later writes are 409s)
    running.child = undefined;
    running.stdin = undefined;
    const end =
      running.endReason ?? (this.#oomKilled(running, code, signal) ? OOM_KILLED : exitMeaning(code, signal, running.spec === undefined && !exitKnown));
    // An adopted process (no spec: not our child, exit status unknown) is not restarted.
    if (!running.endReason && running.spec && end.status === "failed" && mayRestart(running.row)) return this.#restartLater(running, code ?? -1);
    await this.#finish(running, end, code, signal);
  }

  /**
   * Killed by the kernel for the sandbox's memory limit: SIGKILL (or `sh -c`
   * reporting its command's SIGKILL as 137) while the cgroup's OOM-kill count went up.
   */
  #oomKilled(running: Running, code: number | null, signal: NodeJS.Signals | null): boolean {
    if ((signal !== "SIGKILL" && code !== 137) || running.oomKillsAtStart === undefined) return false;
    return (this.#o.oomKills?.() ?? 0) > running.oomKillsAtStart;
  }

  async #finish(running: Running, end: { status: ProcessStatus; error: string | null }, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (running.finishing) return;
    running.finishing = true;
    running.betweenRuns = false;
    for (const t of running.timers) t.cancel();
    running.killTimer?.cancel();
    running.restart?.cancel();
    running.restart = undefined;
    await running.output.finish().catch((err: unknown) => this.#o.logger.warn({ err, processPid: running.row.pid }, "reading final output failed"));
    if (this.#closed) return;
    const completedAt = this.#o.clock.now();
    this.#store.finish(running.row.id, { ...end, exitCode: code, completedAt });
    this.#running.delete(running.row.id);
    this.#o.logger.info({ processPid: running.row.pid, processName: running.row.name, status: end.status, exitCode: code, signal }, "process ended");
    const record = toRecord(this.#store.byId(running.row.id)!);
    if (groupAlive(running.row.runPid)) this.#linger(running.row, running.output.dropped);
    await this.#prune();
    for (const w of running.waiters) w.resolve(record);
  }

  /** Reference §9.7: a notice in stdout, a 1 s pause, the same command again; the record stays `running`, its pid unchanged. */
  #restartLater(running: Running, exitCode: number): void {
    const { row } = running;
    row.restartCount += 1;
    this.#store.countRestart(row.id, row.restartCount);
    const of = row.maxRestarts < 0 ? "unlimited" : String(row.maxRestarts);
    this.#note(running, `\n[Process failed with exit code ${exitCode}. Attempting restart ${row.restartCount}/${of}...]\n`);
    this.#o.logger.info({ processPid: row.pid, processName: row.name, exitCode, restart: row.restartCount }, "process failed: restarting");
    running.betweenRuns = true;
    running.restart = this.#o.clock.setTimer(this.#o.restartDelayMs ?? RESTART_DELAY_MS, () => void this.#respawn(running));
  }

  async #respawn(running: Running): Promise<void> {
    running.restart = undefined;
    const { row, spec } = running;
    if (this.#closed || !spec) return;
    try {
      await this.spawnTurn();
      if (this.#closed) return;
      if (running.endReason) return void (await this.#finish(running, running.endReason, null, null));
      const run = await this.#spawn(
        { ...spec, env: this.#env(spec.env), shell: shellFor(this.#base(), this.#o.spawner === undefined), stdin: row.stdin, wrapper: this.#o.wrapper },
        new LogFiles(this.#o.logDir, row.id),
      );
      running.betweenRuns = false;
      // Stopped or killed while it was being spawned: it ends at once.
      if (running.endReason) signalGroup(run.pid, "SIGKILL");
      row.runPid = run.pid;
      row.procStart = processStartTime(row.runPid);
      row.startedAt = this.#o.clock.now();
      this.#store.restarted(row.id, { runPid: row.runPid, procStart: row.procStart, startedAt: row.startedAt, restartCount: row.restartCount });
      this.#attach(running, run);
      this.#armKillTimer(running);
    } catch (err) {
      this.#note(running, `\n[Failed to restart process: ${(err as Error).message}]\n`);
      await this.#finish(running, { status: "failed", error: `failed to restart: ${(err as Error).message}` }, null, null);
    }
  }

  /** Stop, kill or the kill timer between two runs: nothing to signal, the process ends now. */
  endBetweenRuns(running: Running, reason: { status: ProcessStatus; error: string }): boolean {
    if (!running.betweenRuns) return false;
    running.endReason = reason;
    // During the pause it ends now; during the respawn, #respawn sees endReason and ends it.
    if (running.restart) void this.#finish(running, reason, null, null);
    return true;
  }

  /** A line the agent itself adds to the process's stdout (restart notices), unprefixed in streams. */
  #note(running: Running, text: string): void {
    try {
      appendFileSync(new LogFiles(this.#o.logDir, running.row.id).live("stdout"), text);
    } catch (err) {
      this.#o.logger.warn({ err, processPid: running.row.pid }, "could not write a restart notice");
    }
  }

  /** `sh -c 'server &'` ends at once while the server keeps writing to its files: keep them capped. */
  #linger(row: ProcessRow, dropped: Readonly<Record<StreamName, number>>): void {
    const linger = capWhileGroupLives({
      files: new LogFiles(this.#o.logDir, row.id),
      pid: row.runPid,
      capBytes: this.#o.logMaxBytes,
      dropped,
      stillKnown: () => !this.#closed && this.#store.byId(row.id) !== undefined,
      onDropped: (d) => this.#store.setDropped(row.id, d.stdout, d.stderr),
      onStop: () => this.#lingering.delete(linger),
    });
    this.#lingering.add(linger);
  }

  /** Forgets the oldest finished processes beyond the history size, with their output files. */
  async #prune(): Promise<void> {
    for (const id of this.#store.finishedBeyond(this.#o.maxFinished)) {
      this.#store.delete(id);
      await new LogFiles(this.#o.logDir, id).remove().catch(() => undefined);
    }
  }

  async readOutput(row: ProcessRow, maxBytes: number): Promise<ProcessOutput> {
    const files = new LogFiles(this.#o.logDir, row.id);
    const dropped = this.#running.get(row.id)?.output.dropped ?? { stdout: row.stdoutDropped, stderr: row.stderrDropped };
    const text = {} as Record<StreamName, string>;
    for (const s of STREAMS) {
      const tail = await files.readTail(s, maxBytes, dropped[s]);
      text[s] = truncationMarker(tail.dropped) + tail.data.toString("utf8");
    }
    return { stdout: text.stdout, stderr: text.stderr, logs: text.stdout + text.stderr };
  }

  waitRunning(running: Running): Promise<ProcessRecord> {
    return new Promise((resolve, reject) => running.waiters.push({ resolve, reject }));
  }
}
