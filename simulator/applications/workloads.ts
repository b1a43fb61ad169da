/**
 * ApplicationSpec.proxy: "the application proxies to an existing sandbox (the active revision image is the sandbox
 * name) instead of building and deploying its own compute. Proxy applications have no deployment pipeline and
 * are always reported as deployed" (so does the bind-to-sandbox extension that replaces it): such an application,
 * or a disabled one, has nothing to run.
 */
const BIND_TO_SANDBOX = "ai.blaxel.experimental/bind-to-sandbox";
export const runsOwnCompute = (doc: { spec: Record<string, unknown> }): boolean =>
  doc.spec.enabled !== false && doc.spec.proxy !== true && !(doc.spec.extensions as Record<string, unknown> | undefined)?.[BIND_TO_SANDBOX];

/**
 * What the control plane asks of whatever runs applications (runner.ts): the application kind's hooks and the
 * routes name this, not the runner, so the kinds' dependencies do not import the launcher.
 */
export interface ApplicationWorkloads {
  /** Whether applications run for real; if not, their status follows the simulated plan (records only). */
  readonly runs: boolean;
  /** (Re)starts the application from its record's active revision (its record already reads DEPLOYING). */
  deploy(workspace: string, name: string): void;
  /** Stops the application's workload, if any (disabled, deleted); resolves once no process of it is left. */
  stop(workspace: string, name: string): Promise<void>;
  /** Workspace deletion: every application of the workspace stops. */
  stopWorkspace(workspace: string): Promise<void>;
  /** Whether its workload runs this revision now (an update that changed no compute keeps it running). */
  runsRevision(workspace: string, name: string, revision: string | undefined): boolean;
}

/** The records-only simulator's: nothing runs, applications follow their simulated plan. */
export const SIMULATED_APPLICATIONS: ApplicationWorkloads = {
  runs: false,
  deploy() {},
  stop: async () => {},
  stopWorkspace: async () => {},
  runsRevision: () => false,
};
