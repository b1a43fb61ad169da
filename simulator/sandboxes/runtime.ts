/**
 * What runs behind sandbox records: nothing (records-runtime.ts: statuses follow their simulated plans) or one
 * real sandbox-agent each (agent-runtime.ts). The routes and the expiry sweep call this instead of asking
 * whether agents exist; the composition root picks the implementation. `Ctx` is an operation's context
 * (OpContext): a parameter, so that SimDeps, which holds the runtime, and this file do not import each other.
 */
export interface SandboxRuntime<Ctx> {
  /** POST /sandboxes (the body is validated by the record's kind). */
  create(ctx: Ctx): unknown;
  /** PUT /sandboxes/{name}. */
  update(ctx: Ctx): unknown;
  /** POST /sandboxes/{name}/archive and /unarchive. */
  move(ctx: Ctx, plan: "archive" | "unarchive"): unknown;
  /** Whether the sandbox's agent is starting (expiry waits for it: a start is not cut short). */
  isStarting(workspace: string, name: string): boolean;
  /** When a request last went through the sandbox proxy to it in this process (0: never); expiry's last use. */
  lastUsedMs(workspace: string, name: string): number;
  /** Stops what runs for an expired sandbox and retires its files; errors go to `onError`. */
  retire(workspace: string, name: string, onError: (err: Error) => void): void;
}
