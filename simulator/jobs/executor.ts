/** One job execution, by name. */
export interface ExecutionRef {
  workspace: string;
  job: string;
  execution: string;
}

/**
 * What the control plane asks of the real runner of job executions (runner.ts): the routes name this, not the
 * runner, so the dependencies' type does not import the runner (which uses them).
 */
export interface JobExecutor {
  /** Whether tasks with a command run for real; if not, every execution follows its simulated plan. */
  readonly runsTasks: boolean;
  /** Runs the execution's tasks for real (its document holds the plan). */
  start(ref: ExecutionRef): void;
  /** Stops a running execution's tasks. */
  cancel(ref: ExecutionRef): void;
  /** Stops every running execution of a job (or of a whole workspace). */
  cancelJob(workspace: string, job?: string): void;
}

/** The records-only simulator's: nothing runs, executions follow their simulated plan. */
export const SIMULATED_JOBS: JobExecutor = { runsTasks: false, start() {}, cancel() {}, cancelJob() {} };
