import type { StartProcessRequest } from "../../../sandbox-agent/process/types.js";
import type { RunnerProcess, ScheduleRunner } from "../../../sandbox-agent/schedules/runner.js";

interface FakeProcess {
  request: StartProcessRequest;
  record: RunnerProcess;
  waiters: ((r: RunnerProcess) => void)[];
  output: string;
}

/**
 * A ScheduleRunner whose processes end when the test says so: the scheduler's
 * logic is tested without spawning anything (HTTP tests use the real one).
 */
export class FakeRunner implements ScheduleRunner {
  readonly started: StartProcessRequest[] = [];
  readonly killed: string[] = [];
  readonly #procs = new Map<string, FakeProcess>();
  #pid = 1000;
  /** When set, start() rejects with it. */
  failStart: (Error & { status?: number }) | undefined;

  async start(request: StartProcessRequest): Promise<RunnerProcess> {
    if (this.failStart) throw this.failStart;
    const name = request.name ?? `proc-${this.#pid}`;
    const record: RunnerProcess = { pid: String(++this.#pid), name, status: "running", exitCode: null, error: null };
    this.#procs.set(name, { request, record, waiters: [], output: "" });
    this.started.push(request);
    return { ...record };
  }

  waitForExit(name: string): Promise<RunnerProcess> {
    const p = this.#require(name);
    if (p.record.status !== "running") return Promise.resolve({ ...p.record });
    return new Promise((resolve) => p.waiters.push(resolve));
  }

  async logs(name: string) {
    const p = this.#require(name);
    return { stdout: p.output, stderr: "", logs: p.output };
  }

  async kill(name: string): Promise<void> {
    this.killed.push(name);
    this.end(name, { status: "killed", exitCode: null, error: "killed on request" });
  }

  /** Ends a process: exit 0 by default. */
  end(name: string, how: Partial<RunnerProcess> & { output?: string } = {}): void {
    const p = this.#require(name);
    p.record = {
      ...p.record,
      status: how.status ?? ((how.exitCode ?? 0) === 0 ? "completed" : "failed"),
      exitCode: how.exitCode === undefined ? 0 : how.exitCode,
      error: how.error ?? null,
    };
    p.output = how.output ?? p.output;
    for (const w of p.waiters.splice(0)) w({ ...p.record });
  }

  get running(): string[] {
    return [...this.#procs.values()].filter((p) => p.record.status === "running").map((p) => p.record.name);
  }

  #require(name: string): FakeProcess {
    const p = this.#procs.get(name);
    if (!p) throw Object.assign(new Error(`process ${name} not found`), { status: 404 });
    return p;
  }
}

/** Lets pending promise chains (start → watch → record) settle. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}
