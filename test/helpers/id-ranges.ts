import { resolveIdMapping } from "../../simulator/launcher/id-map.js";
import { which } from "../../simulator/launcher/isolation.js";
import { isolationUnavailable } from "./sandbox-procs.js";

/**
 * Why sandboxes get a single user id on this host (no isolation, no uidmap,
 * or a normal user without subordinate ids), else undefined: tests needing
 * every id skip, saying this. Nothing is reserved by asking.
 */
export function singleIdReason(): string | undefined {
  if (isolationUnavailable) return isolationUnavailable;
  const helpers = { newuidmap: which("newuidmap"), newgidmap: which("newgidmap") };
  // As root the simulator reserves its own block (nothing to check beforehand); a normal user's are read.
  if (process.getuid?.() === 0) return helpers.newuidmap && helpers.newgidmap ? undefined : "newuidmap/newgidmap are not installed";
  const ids = resolveIdMapping({ helpers });
  return ids.kind === "single" ? ids.reason : undefined;
}
