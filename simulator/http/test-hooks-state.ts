/**
 * Switches test hooks flip at run time. Present even without --test-hooks
 * (with defaults) so the rest of the simulator reads one place.
 */
export type TransitionMode = "timed" | "immediate" | "manual";

export interface FaultRule {
  method?: string;
  /** Exact request path (e.g. /v0/sandboxes) or a prefix ending in `*`. */
  path?: string;
  status: number;
  /** How many matching requests fail; unlimited when absent. */
  times?: number;
}

export interface DnsRecords {
  txt?: Record<string, string>;
  cname?: string;
}

export interface TestHooksState {
  enabled: boolean;
  transitions: TransitionMode;
  faults: FaultRule[];
  /** Simulated DNS, per domain, read by POST /customdomains/{name}/verify. */
  dns: Map<string, DnsRecords>;
}

export function initialHooksState(enabled: boolean): TestHooksState {
  return { enabled, transitions: "timed", faults: [], dns: new Map() };
}
