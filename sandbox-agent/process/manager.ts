import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, mkdirSync } from "node:fs";
import { errors } from "../../src/errors.js";
import type { Timer } from "../../src/clock.js";
import { LiveOutput } from "./live-output.js";
import { groupAlive, isSameProcessAlive, preferOomVictim, processStartTime, signalGroup } from "./os.js";
import { capWhileGroupLives } from "./linger.js";
import { LogFiles, STREAMS, truncationMarker, type StreamName } from "./output.js";
import { exitMeaning, randomName, toRecord } from "./record.js";
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
  output: LiveOutput;
  /** Set by stop, kill or the timeout: what the exit means. */
  endReason?: { status: ProcessStatus; error: string };
  timers: Timer[];
  /** Adopted after a restart: polled, since it is not our child. */
  poll?: NodeJS.Timeout;
  /** The sandbox's OOM-kill count when the process started: a SIGKILL with a higher count since is an OOM kill. */
  oomKillsAtStart?: number;
  waiters: { resolve(r: ProcessRecord): void; reject(e: Error): void }[];
}

const ADOPTED_POLL_MS = 500;
/** What the platform reports for a process the kernel killed at the sandbox's memory limit. */
const OOM_KILLED = { status: "failed" as ProcessStatus, error: "killed by the OOM killer: the sandbox ran out of memory (spec.runtime.memory)" };

/**
 * Runs commands with `sh -c` in their own process group, captures their
 * output to capped files, records them in SQLite, and enforces timeouts.
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
      if (isSameProcessAlive(row.pid, row.procStart)) {
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
    const running = this.#requireRunning(pidOrName);
    const ended = this.#waitRunning(running);
    if (signalGroup(running.row.pid, "SIGTERM")) running.endReason ??= { status: "stopped", error: "stopped on request" };
    running.timers.push(this.#o.clock.setTimer(this.#o.stopGraceMs, () => signalGroup(running.row.pid, "SIGKILL")));
    await ended;
  }

  /** SIGKILL to the group; resolves once it has ended. 404 unknown, 409 not running. */
  async kill(pidOrName: string): Promise<void> {
    const running = this.#requireRunning(pidOrName);
    const ended = this.#waitRunning(running);
    if (signalGroup(running.row.pid, "SIGKILL")) running.endReason = { status: "killed", error: "killed on request" };
    await ended;
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

  async #spawn(input: StartProcessRequest, name: string, workingDir: string, cwd: string): Promise<ProcessRecord> {
    const files = new LogFiles(this.#o.logDir, randomUUID());
    const fds = files.openForChild();
    let child: ChildProcess;
    try {
      const [file, ...args] = [...(this.#o.wrapper ?? []), "/bin/sh", "-c", input.command];
      child = spawn(file!, args, {
        cwd,
        env: { ...inheritedEnv(this.#o.baseEnv ?? process.env), ...input.env },
        detached: true, // own process group: stop/kill/timeout reach everything it starts
        stdio: ["ignore", fds.stdout, fds.stderr],
      });
    } finally {
      closeSync(fds.stdout);
      closeSync(fds.stderr);
    }
    if (child.pid === undefined) {
      const err = await new Promise<Error>((resolve) => child.once("error", resolve));
      await files.remove();
      throw errors.unprocessable(`failed to start process: ${err.message}`);
    }
    child.on("error", (err) => this.#o.logger.error({ err, processPid: child.pid }, "process error"));
    child.unref();
    const row: ProcessRow = {
      id: files.id,
      pid: child.pid,
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
      procStart: processStartTime(child.pid),
      stdoutDropped: 0,
      stderrDropped: 0,
    };
    this.#store.insert(row);
    const running = this.#track(row, files);
    running.child = child;
    running.oomKillsAtStart = this.#o.oomKills?.();
    // Under a memory limit the command, not the agent, should be the OOM killer's choice (raising needs no privilege).
    if (running.oomKillsAtStart !== undefined) preferOomVictim(child.pid);
    child.once("exit", (code, signal) => void this.#ended(running, code, signal));
    this.#o.logger.info({ processPid: row.pid, processName: name, workingDir, timeout: row.timeout }, "process started");
    return toRecord(row);
  }

  #adopt(row: ProcessRow): void {
    const files = new LogFiles(this.#o.logDir, row.id);
    const running = this.#track(row, files, true);
    running.poll = setInterval(() => {
      if (!isSameProcessAlive(row.pid, row.procStart)) void this.#ended(running, null, null);
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
    if (row.timeout > 0) {
      const left = row.startedAt + row.timeout * 1000 - this.#o.clock.now();
      running.timers.push(this.#o.clock.setTimer(left, () => {
        this.#o.logger.info({ processPid: row.pid, processName: row.name, timeout: row.timeout }, "process timed out: killing its group");
        if (signalGroup(row.pid, "SIGKILL")) running.endReason = { status: "killed", error: `timed out after ${row.timeout} seconds` };
      }));
    }
    return running;
  }

  async #ended(running: Running, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (this.#closed || this.#running.get(running.row.id) !== running) return;
    if (running.poll) clearInterval(running.poll);
    running.poll = undefined;
    for (const t of running.timers) t.cancel();
    await running.output.finish().catch((err: unknown) => this.#o.logger.warn({ err, processPid: running.row.pid }, "reading final output failed"));
    if (this.#closed) return;
    const end = running.endReason ?? (this.#oomKilled(running, code, signal) ? OOM_KILLED : exitMeaning(code, signal, running.child === undefined));
    const completedAt = this.#o.clock.now();
    this.#store.finish(running.row.id, { ...end, exitCode: code, completedAt });
    this.#running.delete(running.row.id);
    this.#o.logger.info({ processPid: running.row.pid, processName: running.row.name, status: end.status, exitCode: code, signal }, "process ended");
    const record = toRecord(this.#store.byId(running.row.id)!);
    if (groupAlive(running.row.pid)) this.#linger(running.row, running.output.dropped);
    await this.#prune();
    for (const w of running.waiters) w.resolve(record);
  }

  /**
   * Killed by the kernel for the sandbox's memory limit: SIGKILL (or `sh -c`
   * reporting its command's SIGKILL as 137) while the cgroup's OOM-kill count went up.
   */
  #oomKilled(running: Running, code: number | null, signal: NodeJS.Signals | null): boolean {
    if ((signal !== "SIGKILL" && code !== 137) || running.oomKillsAtStart === undefined) return false;
    return (this.#o.oomKills?.() ?? 0) > running.oomKillsAtStart;
  }

  /** `sh -c 'server &'` ends at once while the server keeps writing to its files: keep them capped. */
  #linger(row: ProcessRow, dropped: Readonly<Record<StreamName, number>>): void {
    const linger = capWhileGroupLives({
      files: new LogFiles(this.#o.logDir, row.id),
      pid: row.pid,
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
