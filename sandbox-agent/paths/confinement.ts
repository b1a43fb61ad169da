import { openat2Support } from "./openat2.js";

/**
 * Which mechanism confines API paths under the root:
 * - "openat2": the kernel resolves every path inside the root (in-root.ts); Linux ≥ 5.6 and the addon.
 * - "path-checks": the agent's own descriptor walk (beneath.ts), one component at a time with links
 *   read and re-rooted by hand; the fallback, and what `--confinement path-checks` forces.
 */
export type ConfinementSetting = "auto" | "openat2" | "path-checks";

export type Confinement = { mode: "openat2" } | { mode: "path-checks"; reason: string };

export const CONFINEMENT_SETTINGS = ["auto", "openat2", "path-checks"] as const;

/** "auto" falls back and says why; "openat2" demanded where it cannot run is a start-up error. */
export function chooseConfinement(setting: ConfinementSetting): Confinement {
  if (setting === "path-checks") return { mode: "path-checks", reason: "forced by the confinement setting (--confinement path-checks)" };
  const support = openat2Support();
  if (support.available) return { mode: "openat2" };
  if (setting === "openat2") throw new Error(`--confinement openat2: ${support.reason}`);
  return { mode: "path-checks", reason: support.reason };
}
