/** How sandboxes' agents run, for /health, the start-up line and the standby test hook: the launcher and what it isolates. */
export interface SandboxIsolation {
  launcher: string;
  isolated: boolean;
  detail: string;
  userIds?: { all: boolean; detail: string };
  /** Who serves the sandboxes' agent API (LauncherDescription.agents). */
  agents?: { mode: "host" | "process"; reason?: string };
  /** Standby: the idle period, or why sandboxes never sleep with this launcher. */
  standby?: { afterMs: number } | { unavailable: string };
}

/** A records-only simulator: no sandbox agent runs (its /health has no "sandboxes" section). */
export const RECORDS_ONLY: SandboxIsolation = { launcher: "none", isolated: false, detail: "records only: no sandbox agent runs" };
