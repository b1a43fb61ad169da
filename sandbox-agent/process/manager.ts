import { mkdirSync } from "node:fs";
import { errors } from "../../src/errors.js";
import type { LiveOutput } from "./live-output.js";
import { groupAlive, isSameProcessAlive, signalGroup } from "./os.js";
import { randomName, toRecord } from "./record.js";
import { ProcessStore, type ProcessRow } from "./process-store.js";
import { Supervisor, type Running } from "./supervisor.js";
import type { ProcessManagerOptions, ProcessOutput, ProcessRecord, StartProcessRequest } from "./types.js";
import { resolveWorkingDir, validateStartRequest } from "./validate.js";

export type { ProcessStatus } from "./process-store.js";
// The manager's public contract (schedules code against it) lives in types.ts.
export type { ProcessManagerOptions, ProcessOutput, ProcessRecord, StartProcessRequest } from "./types.js";

/** What followers of the output read, unprefixed, when the process is stopped or killed (reference §4.4, its exact bytes). */
export const STOP_NOTICE = "\n[Process is being gracefully terminated]\n";
export const KILL_NOTICE = "\n[Process is being forcefully killed]\n";

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
  readonly #runs: Supervisor;
  /** Names between the running-name check and the insert, so two starts cannot both pass. */
  readonly #starting = new Set<string>();
  #closed = false;

  constructor(options: ProcessManagerOptions) {
    this.#o = options;
    this.#store = new ProcessStore(options.db);
    this.#runs = new Supervisor(options, this.#store);
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
        this.#runs.adopt(row);
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
      const workingDir = input.workingDir ?? this.#o.defaultWorkingDir ?? "/";
      const sandboxDir = this.#o.paths.normalize(workingDir, "workingDir");
      const cwd = await resolveWorkingDir(this.#o.paths, input.command, workingDir, sandboxDir);
      await this.#runs.spawnTurn();
      if (this.#closed) throw errors.serviceUnavailable("the agent is shutting down");
      return await this.#runs.spawnNew(input, name, sandboxDir, cwd);
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
    const running = this.#runs.running(row.id);
    if (row.status !== "running" || !running) return Promise.resolve(toRecord(row));
    return this.#runs.waitRunning(running);
  }

  /** The captured output, each stream cut to the last `maxBytes` (default: the cap) behind a truncation marker. 404 if unknown. */
  async logs(pidOrName: string, maxBytes = this.#o.logMaxBytes): Promise<ProcessOutput> {
    return this.#runs.readOutput(this.#require(pidOrName), maxBytes);
  }

  /** Graceful stop: SIGTERM to the group, SIGKILL after the grace period; resolves once it has ended. 404 unknown, 409 not running. */
  async stop(pidOrName: string): Promise<void> {
    if (this.#signalLeftovers(pidOrName, "SIGTERM")) return;
    const running = this.#requireRunning(pidOrName);
    const ended = this.#runs.waitRunning(running);
    running.output.notice(STOP_NOTICE);
    if (this.#runs.endBetweenRuns(running, { status: "stopped", error: "stopped on request" })) return void (await ended);
    const group = running.row.runPid;
    if (signalGroup(group, "SIGTERM")) running.endReason ??= { status: "stopped", error: "stopped on request" };
    this.#killAfterGrace(group);
    await ended;
  }

  /** SIGKILL to the group; resolves once it has ended. 404 unknown, 409 not running. */
  async kill(pidOrName: string): Promise<void> {
    if (this.#signalLeftovers(pidOrName, "SIGKILL")) return;
    const running = this.#requireRunning(pidOrName);
    const ended = this.#runs.waitRunning(running);
    running.output.notice(KILL_NOTICE);
    if (this.#runs.endBetweenRuns(running, { status: "killed", error: "killed on request" })) return void (await ended);
    if (signalGroup(running.row.runPid, "SIGKILL")) running.endReason = { status: "killed", error: "killed on request" };
    await ended;
  }

  /** Writes to the stdin of a process started with `stdin: true`. 404 unknown; 409 no stdin, closed or gone; 503 not reading. */
  async writeStdin(pidOrName: string, data: Buffer): Promise<void> {
    const { running, name } = this.#requireStdin(pidOrName);
    if (!running) throw errors.conflict(`stdin of process '${name}' is closed: the process has ended`);
    if (!running.stdin) {
      const why = running.betweenRuns ? "the process is being restarted" : "the agent restarted since it started, and the pipe does not survive that";
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
    return { runPid: row.runPid, alive: this.#runs.running(row.id) !== undefined || groupAlive(row.runPid) };
  }

  /** A record with its output inlined (each stream cut to `maxBytes`), as the API's responses carry it. */
  async describe(pidOrName: string, maxBytes: number): Promise<ProcessRecord & ProcessOutput> {
    const row = this.#require(pidOrName);
    return { ...toRecord(row), ...(await this.#runs.readOutput(row, maxBytes)) };
  }

  /** Every known process with its output inlined, oldest first. */
  async describeAll(maxBytes: number): Promise<(ProcessRecord & ProcessOutput)[]> {
    const result = [];
    for (const row of this.#store.all()) result.push({ ...toRecord(row), ...(await this.#runs.readOutput(row, maxBytes)) });
    return result;
  }

  /** Follows a running process's output; undefined once it has ended (read the files instead). */
  live(pidOrName: string): { record: ProcessRecord; output: LiveOutput } | undefined {
    const row = this.#find(pidOrName);
    const running = row && this.#runs.running(row.id);
    return running && { record: toRecord(row), output: running.output };
  }

  /**
   * Stops watching. Processes keep running (they outlive the agent); pending waits are rejected with 503.
   * `handOver`: an upgrade, this process stays their parent and records their exits for the new agent.
   */
  close(handOver = false): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#runs.close(handOver);
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

  /**
   * An ended process whose group lives on (`sh -c 'server &'`): stop and kill
   * reach the group, as the reference's signal to `-pid` does; its record
   * keeps the status it ended with. False when there is nothing of the kind.
   */
  #signalLeftovers(pidOrName: string, signal: NodeJS.Signals): boolean {
    const row = this.#require(pidOrName);
    // A group that got SIGKILL (kill, timeout) has nothing left to signal: what still shows is only dying. A
    // stopped one got SIGTERM and its SIGKILL is due at the end of the grace period: nothing to add either.
    if (row.status === "running" || row.status === "killed" || row.status === "stopped" || !groupAlive(row.runPid)) return false;
    signalGroup(row.runPid, signal);
    if (signal === "SIGTERM") this.#killAfterGrace(row.runPid);
    return true;
  }

  /** SIGKILL to what is left of the group when the stop's grace period ends. Not a run timer: it must outlive the leader, for members that ignore SIGTERM. */
  #killAfterGrace(group: number): void {
    this.#o.clock.setTimer(this.#o.stopGraceMs, () => {
      if (groupAlive(group)) signalGroup(group, "SIGKILL");
    });
  }

  #requireStdin(pidOrName: string): { running?: Running; name: string } {
    const row = this.#require(pidOrName);
    if (!row.stdin) throw errors.conflict(`process '${pidOrName}' was not started with stdin: true`);
    return { running: row.status === "running" ? this.#runs.running(row.id) : undefined, name: pidOrName };
  }

  #requireRunning(pidOrName: string): Running {
    const row = this.#require(pidOrName);
    const running = this.#runs.running(row.id);
    if (row.status !== "running" || !running) throw errors.conflict(`process '${pidOrName}' is not running (status: ${row.status})`);
    return running;
  }
}
