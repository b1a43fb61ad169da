import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { appendFileSync, mkdirSync } from "node:fs";
import { errors } from "../../src/errors.js";
import type { Timer } from "../../src/clock.js";
import { LiveOutput } from "./live-output.js";
import { groupAlive, isSameProcessAlive, processStartTime, signalGroup } from "./os.js";
import { capWhileGroupLives } from "./linger.js";
import { LogFiles, STREAMS, truncationMarker, type StreamName } from "./output.js";
import { exitMeaning, randomName, toRecord } from "./record.js";
import { spawnInGroup } from "./spawn.js";
import { StdinPipe } from "./stdin.js";
import { ProcessStore, type ProcessRow, type ProcessStatus } from "./store.js";
import type { ProcessManagerOptions, ProcessOutput, ProcessRecord, StartProcessRequest } from "./types.js";
import { resolveWorkingDir, validateStartRequest } from "./validate.js";

export type { ProcessStatus } from "./store.js";
// The manager's public contract (schedules code against it) lives in types.ts.
export type { ProcessManagerOptions, ProcessOutput, ProcessRecord, StartProcessRequest } from "./types.js";

/** In-memory state of a process this agent is watching. */
interface Running {
  row: ProcessRow;
  child?: ChildProcess;
  stdin?: StdinPipe;
  /** The client closed stdin: a restarted run gets EOF at once too. */
  stdinClosed?: boolean;
  /** How to run it again (restartOnFailure); absent for a process adopted after an agent restart. */
  spec?: { command: string; cwd: string; env?: Record<string, string> };
  output: LiveOutput;
  /** Set by stop, kill or the kill timer: what the exit means. */
  endReason?: { status: ProcessStatus; error: string };
  /** Stop's SIGKILL after the grace period. */
  timers: Timer[];
  killTimer?: Timer;
  /** Pending respawn after a failed run. */
  restart?: Timer;
  /** Adopted after a restart: polled, since it is not our child. */
  poll?: NodeJS.Timeout;
  waiters: { resolve(r: ProcessRecord): void; reject(e: Error): void }[];
}

const ADOPTED_POLL_MS = 500;
const RESTART_DELAY_MS = 1_000; // reference: 1 s between a failure and the restart
const STDIN_STALL_MS = 30_000;

/**
 * Runs commands with the sandbox's shell in their own process group, captures
 * their output to capped files, records them in SQLite, restarts the failed
 * ones that asked for it, and kills those with a kill timer when it expires.
 * Processes outlive the agent (as the reference daemon's do); on the next
 * start the survivors are adopted and the vanished ones marked failed.
 */
export class ProcessManager {
  readonly #o: ProcessManagerOptions;
  readonly #store: ProcessStore;
  readonly #running = new Map<string, Running>();
  /** Names between the running-name check and the insert, so two starts cannot both pass. */
  readonly #starting = new Set<string>();
  /** Cap timers for ended processes whose background children still write to the output files. */
  readonly #lingering = new Set<{ stop(): void }>();
  /** spawn() blocks the event loop for a fork; this chain gives each its own loop turn. */
  #spawnTurns: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(options: ProcessManagerOptions) {
    this.#o = options;
    this.#store = new ProcessStore(options.db);
    mkdirSync(options.logDir, { recursive: true });
  }

  /**
   * Reconciles records left `running` by a previous agent: a process still
   * alive (same pid and kernel start time) is adopted — followed, its timeout
   * re-armed — and one that is gone is marked failed with "agent restarted".
   */
  recover(): void {
    for (const row of this.#store.running()) {
      if (isSameProcessAlive(row.runPid, row.procStart)) {
        this.#adopt(row);
      } else {
        this.#store.finish(row.id, { status: "failed", exitCode: null, error: "agent restarted", completedAt: this.#o.clock.now() });
        this.#o.logger.warn({ processPid: row.pid, processName: row.name }, "process gone after agent restart: marked failed");
      }
    }
  }

  /** Starts a command; resolves once it is spawned. 400 bad input, 403 workingDir outside the root, 409 running-name clash, 422 start failure. */
  async start(req: StartProcessRequest): Promise<ProcessRecord> {
    if (this.#closed) throw errors.serviceUnavailable("the agent is shutting down");
    const input = validateStartRequest(req);
    const name = input.name ?? `proc-${randomName()}`;
    if (this.#starting.has(name) || this.#store.runningByName(name)) throw errors.conflict(`process with name '${name}' already exists and is running`);
    this.#starting.add(name);
    try {
      const sandboxDir = this.#o.paths.normalize(input.workingDir ?? "/", "workingDir");
      const cwd = await resolveWorkingDir(this.#o.paths, input.command, input.workingDir ?? "/", sandboxDir);
      await this.#spawnTurn();
      if (this.#closed) throw errors.serviceUnavailable("the agent is shutting down");
      return await this.#spawn(input, name, sandboxDir, cwd);
    } finally {
      this.#starting.delete(name);
    }
  }

  /** Per-stream output cap, in bytes. */
  get logMaxBytes(): number {
    return this.#o.logMaxBytes;
  }

  get(pidOrName: string): ProcessRecord | undefined {
    const row = this.#find(pidOrName);
    return row && toRecord(row);
  }

  /** Every known process, oldest first. */
  list(): ProcessRecord[] {
    return this.#store.all().map(toRecord);
  }

  /** Resolves with the final record once the process has ended (at once if it has). 404 if unknown. */
  waitForExit(pidOrName: string): Promise<ProcessRecord> {
    const row = this.#require(pidOrName);
    const running = this.#running.get(row.id);
    if (row.status !== "running" || !running) return Promise.resolve(toRecord(row));
    return this.#waitRunning(running);
  }

  /** The captured output, each stream cut to the last `maxBytes` (default: the cap) behind a truncation marker. 404 if unknown. */
  async logs(pidOrName: string, maxBytes = this.#o.logMaxBytes): Promise<ProcessOutput> {
    return this.#readOutput(this.#require(pidOrName), maxBytes);
  }

  /** Graceful stop: SIGTERM to the group, SIGKILL after the grace period; resolves once it has ended. 404 unknown, 409 not running. */
  async stop(pidOrName: string): Promise<void> {
    if (this.#signalLeftovers(pidOrName, "SIGTERM")) return;
    const running = this.#requireRunning(pidOrName);
    const ended = this.#waitRunning(running);
    if (this.#endBetweenRuns(running, { status: "stopped", error: "stopped on request" })) return void (await ended);
    if (signalGroup(running.row.runPid, "SIGTERM")) running.endReason ??= { status: "stopped", error: "stopped on request" };
    running.timers.push(this.#o.clock.setTimer(this.#o.stopGraceMs, () => signalGroup(running.row.runPid, "SIGKILL")));
    await ended;
  }

  /** SIGKILL to the group; resolves once it has ended. 404 unknown, 409 not running. */
  async kill(pidOrName: string): Promise<void> {
    if (this.#signalLeftovers(pidOrName, "SIGKILL")) return;
    const running = this.#requireRunning(pidOrName);
    const ended = this.#waitRunning(running);
    if (this.#endBetweenRuns(running, { status: "killed", error: "killed on request" })) return void (await ended);
    if (signalGroup(running.row.runPid, "SIGKILL")) running.endReason = { status: "killed", error: "killed on request" };
    await ended;
  }

  /** Writes to the stdin of a process started with `stdin: true`. 404 unknown; 409 no stdin, closed or gone; 503 not reading. */
  async writeStdin(pidOrName: string, data: Buffer): Promise<void> {
    const { running, name } = this.#requireStdin(pidOrName);
    if (!running) throw errors.conflict(`stdin of process '${name}' is closed: the process has ended`);
    if (!running.stdin) {
      const why = running.restart ? "the process is being restarted" : "the agent restarted since it started, and the pipe does not survive that";
      throw errors.conflict(`stdin of process '${name}' is gone: ${why}`);
    }
    await running.stdin.write(name, data);
  }

  /** EOF to the process's stdin; idempotent (an ended process too). 404 unknown, 409 started without stdin. */
  closeStdin(pidOrName: string): void {
    const { running } = this.#requireStdin(pidOrName);
    if (!running) return;
    running.stdinClosed = true;
    running.stdin?.close();
  }

  /**
   * The OS pid of the current (or last) run of a known process, whose tree's
   * sockets count as its own; `alive` while it runs or members of its process
   * group live on (`sh -c 'server &'`). Undefined for a pid the agent did not start.
   */
  runOf(pid: number): { runPid: number; alive: boolean } | undefined {
    const row = this.#store.byPid(pid);
    if (!row) return undefined;
    return { runPid: row.runPid, alive: this.#running.has(row.id) || groupAlive(row.runPid) };
  }

  /** A record with its output inlined (each stream cut to `maxBytes`), as the API's responses carry it. */
  async describe(pidOrName: string, maxBytes: number): Promise<ProcessRecord & ProcessOutput> {
    const row = this.#require(pidOrName);
    return { ...toRecord(row), ...(await this.#readOutput(row, maxBytes)) };
  }

  /** Every known process with its output inlined, oldest first. */
  async describeAll(maxBytes: number): Promise<(ProcessRecord & ProcessOutput)[]> {
    const result = [];
    for (const row of this.#store.all()) result.push({ ...toRecord(row), ...(await this.#readOutput(row, maxBytes)) });
    return result;
  }

  /** Follows a running process's output; undefined once it has ended (read the files instead). */
  live(pidOrName: string): { record: ProcessRecord; output: LiveOutput } | undefined {
    const row = this.#find(pidOrName);
    const running = row && this.#running.get(row.id);
    return running && { record: toRecord(row), output: running.output };
  }

  /** Stops watching. Processes keep running (they outlive the agent); pending waits are rejected with 503. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const running of this.#running.values()) {
      for (const t of running.timers) t.cancel();
      running.killTimer?.cancel();
      running.restart?.cancel();
      if (running.poll) clearInterval(running.poll);
      running.child?.removeAllListeners("exit");
      running.output.abandon();
      for (const w of running.waiters) w.reject(errors.serviceUnavailable("the agent is shutting down"));
    }
    this.#running.clear();
    for (const linger of this.#lingering) linger.stop();
    this.#lingering.clear();
  }

  // --- internals ---------------------------------------------------------

  /**
   * Node forks synchronously (a few ms for a process of the agent's size), so
   * a burst of starts — a thousand `at` schedules due the same second — would
   * stall timers and requests for seconds. One spawn per event-loop turn lets
   * them run in between.
   */
  #spawnTurn(): Promise<void> {
    const turn = this.#spawnTurns.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
    this.#spawnTurns = turn;
    return turn;
  }

  #env(custom: Record<string, string> | undefined): NodeJS.ProcessEnv {
    const base = typeof this.#o.baseEnv === "function" ? this.#o.baseEnv() : this.#o.baseEnv ?? process.env;
    return { ...inheritedEnv(base), ...custom };
  }

  async #spawn(input: StartProcessRequest, name: string, workingDir: string, cwd: string): Promise<ProcessRecord> {
    const files = new LogFiles(this.#o.logDir, randomUUID());
    const stdin = input.stdin ?? false;
    let child: ChildProcess;
    try {
      child = await spawnInGroup({ command: input.command, cwd, env: this.#env(input.env), stdin }, files);
    } catch (err) {
      await files.remove();
      throw errors.unprocessable(`failed to start process: ${(err as Error).message}`);
    }
    const pid = child.pid!;
    const row: ProcessRow = {
      id: files.id,
      pid,
      runPid: pid,
      name,
      command: input.command,
      status: "running",
      exitCode: null,
      error: null,
      startedAt: this.#o.clock.now(),
      completedAt: null,
      workingDir,
      keepAlive: input.keepAlive ?? false,
      timeout: input.timeout ?? 0,
      killAfter: input.killAfter ?? 0,
      restartOnFailure: input.restartOnFailure ?? false,
      maxRestarts: input.maxRestarts ?? 0,
      restartCount: 0,
      stdin,
      procStart: processStartTime(pid),
      stdoutDropped: 0,
      stderrDropped: 0,
    };
    this.#store.insert(row);
    const running = this.#track(row, files);
    running.spec = { command: input.command, cwd, env: input.env };
    this.#attach(running, child);
    this.#o.logger.info({ processPid: pid, processName: name, workingDir, killAfter: row.killAfter }, "process started");
    return toRecord(row);
  }

  /** Follows a run's exit and takes its stdin pipe. */
  #attach(running: Running, child: ChildProcess): void {
    running.child = child;
    child.on("error", (err) => this.#o.logger.error({ err, processPid: child.pid }, "process error"));
    if (child.stdin) {
      running.stdin = new StdinPipe(child.stdin, this.#o.clock, STDIN_STALL_MS);
      if (running.stdinClosed) running.stdin.close();
    }
    child.once("exit", (code, signal) => void this.#ended(running, code, signal));
  }

  #adopt(row: ProcessRow): void {
    const files = new LogFiles(this.#o.logDir, row.id);
    const running = this.#track(row, files, true);
    running.poll = setInterval(() => {
      if (!isSameProcessAlive(row.runPid, row.procStart)) void this.#ended(running, null, null);
    }, ADOPTED_POLL_MS);
    running.poll.unref();
    this.#o.logger.info({ processPid: row.pid, processName: row.name }, "process adopted after agent restart");
  }

  #track(row: ProcessRow, files: LogFiles, adopted = false): Running {
    const output = new LiveOutput(files, {
      capBytes: this.#o.logMaxBytes,
      dropped: { stdout: row.stdoutDropped, stderr: row.stderrDropped },
      offsets: adopted ? undefined : { stdout: 0, stderr: 0 },
      onDropped: (d) => { if (!this.#closed) this.#store.setDropped(row.id, d.stdout, d.stderr); },
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
      if (this.#endBetweenRuns(running, reason)) return;
      if (signalGroup(row.runPid, "SIGKILL")) running.endReason = reason;
    });
  }

  async #ended(running: Running, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (this.#closed || this.#running.get(running.row.id) !== running) return;
    if (running.poll) clearInterval(running.poll);
    running.poll = undefined;
    running.child = undefined;
    running.stdin = undefined;
    const end = running.endReason ?? exitMeaning(code, signal, running.spec === undefined);
    if (!running.endReason && end.status === "failed" && this.#mayRestart(running.row)) return this.#restartLater(running, code ?? -1);
    await this.#finish(running, end, code, signal);
  }

  async #finish(running: Running, end: { status: ProcessStatus; error: string | null }, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
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

  #mayRestart(row: ProcessRow): boolean {
    return row.restartOnFailure && (row.maxRestarts < 0 || row.restartCount < row.maxRestarts);
  }

  /** Reference §9.7: a notice in stdout, a 1 s pause, the same command again; the record stays `running`, its pid unchanged. */
  #restartLater(running: Running, exitCode: number): void {
    const { row } = running;
    row.restartCount += 1;
    this.#store.countRestart(row.id, row.restartCount);
    const of = row.maxRestarts < 0 ? "unlimited" : String(row.maxRestarts);
    this.#note(running, `\n[Process failed with exit code ${exitCode}. Attempting restart ${row.restartCount}/${of}...]\n`);
    this.#o.logger.info({ processPid: row.pid, processName: row.name, exitCode, restart: row.restartCount }, "process failed: restarting");
    running.restart = this.#o.clock.setTimer(this.#o.restartDelayMs ?? RESTART_DELAY_MS, () => void this.#respawn(running));
  }

  async #respawn(running: Running): Promise<void> {
    running.restart = undefined;
    const { row, spec } = running;
    if (this.#closed || !spec) return;
    try {
      await this.#spawnTurn();
      if (this.#closed || running.endReason) return;
      const child = await spawnInGroup({ ...spec, env: this.#env(spec.env), stdin: row.stdin }, new LogFiles(this.#o.logDir, row.id));
      row.runPid = child.pid!;
      row.procStart = processStartTime(row.runPid);
      row.startedAt = this.#o.clock.now();
      this.#store.restarted(row.id, { runPid: row.runPid, procStart: row.procStart, startedAt: row.startedAt, restartCount: row.restartCount });
      this.#attach(running, child);
      this.#armKillTimer(running);
    } catch (err) {
      this.#note(running, `\n[Failed to restart process: ${(err as Error).message}]\n`);
      await this.#finish(running, { status: "failed", error: `failed to restart: ${(err as Error).message}` }, null, null);
    }
  }

  /** Stop, kill or the kill timer between two runs: nothing to signal, the process ends now. */
  #endBetweenRuns(running: Running, reason: { status: ProcessStatus; error: string }): boolean {
    if (!running.restart) return false;
    running.endReason = reason;
    void this.#finish(running, reason, null, null);
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

  async #readOutput(row: ProcessRow, maxBytes: number): Promise<ProcessOutput> {
    const files = new LogFiles(this.#o.logDir, row.id);
    const dropped = this.#running.get(row.id)?.output.dropped ?? { stdout: row.stdoutDropped, stderr: row.stderrDropped };
    const text = {} as Record<StreamName, string>;
    for (const s of STREAMS) {
      const tail = await files.readTail(s, maxBytes, dropped[s]);
      text[s] = truncationMarker(tail.dropped) + tail.data.toString("utf8");
    }
    return { stdout: text.stdout, stderr: text.stderr, logs: text.stdout + text.stderr };
  }

  /** Reference rule: an all-digit identifier is a pid and nothing else; anything else is a name (latest start wins). */
  #find(pidOrName: string): ProcessRow | undefined {
    if (/^\d+$/.test(pidOrName)) return this.#store.byPid(Number(pidOrName));
    return this.#store.byName(pidOrName);
  }

  #require(pidOrName: string): ProcessRow {
    const row = this.#find(pidOrName);
    if (!row) throw errors.notFound(`process '${pidOrName}' not found`);
    return row;
  }

  #waitRunning(running: Running): Promise<ProcessRecord> {
    return new Promise((resolve, reject) => running.waiters.push({ resolve, reject }));
  }

  /**
   * An ended process whose group lives on (`sh -c 'server &'`): stop and kill
   * reach the group, as the reference's signal to `-pid` does; its record
   * keeps the status it ended with. False when there is nothing of the kind.
   */
  #signalLeftovers(pidOrName: string, signal: NodeJS.Signals): boolean {
    const row = this.#require(pidOrName);
    if (row.status === "running" || !groupAlive(row.runPid)) return false;
    signalGroup(row.runPid, signal);
    if (signal === "SIGTERM") this.#o.clock.setTimer(this.#o.stopGraceMs, () => { if (groupAlive(row.runPid)) signalGroup(row.runPid, "SIGKILL"); });
    return true;
  }

  #requireStdin(pidOrName: string): { running?: Running; name: string } {
    const row = this.#require(pidOrName);
    if (!row.stdin) throw errors.conflict(`process '${pidOrName}' was not started with stdin: true`);
    return { running: row.status === "running" ? this.#running.get(row.id) : undefined, name: pidOrName };
  }

  #requireRunning(pidOrName: string): Running {
    const row = this.#require(pidOrName);
    const running = this.#running.get(row.id);
    if (row.status !== "running" || !running) throw errors.conflict(`process '${pidOrName}' is not running (status: ${row.status})`);
    return running;
  }
}

/** The agent's environment minus its own API token: a command in the sandbox should not learn it for free. */
function inheritedEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { SANDBOX_AGENT_TOKEN: _token, ...rest } = env;
  return rest;
}
