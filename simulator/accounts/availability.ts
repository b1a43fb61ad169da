import type { AccountStore } from "../store/accounts.js";

/**
 * Workspace-name availability (seed: POST /workspaces/availability). Reserved
 * names are a documented list; names containing the brand are refused with
 * `forbidden_blaxel` (the seed spells it `forbidden_service`; requests using
 * the seed's Service-* headers get that spelling); `v` + digits is refused
 * because it collides with API version paths.
 */
export const RESERVED_WORKSPACE_NAMES = [
  "admin",
  "api",
  "app",
  "apps",
  "www",
  "web",
  "mail",
  "support",
  "help",
  "docs",
  "status",
  "billing",
  "console",
  "dashboard",
  "login",
  "auth",
  "oauth",
  "account",
  "accounts",
  "settings",
  "root",
  "system",
  "internal",
  "default-workspace",
  "run",
  "preview",
  "static",
  "cdn",
] as const;

export type AvailabilityReason = "taken" | "forbidden_reserved" | "forbidden_blaxel" | "forbidden_service" | "forbidden_v_prefix";

export interface Availability {
  available: boolean;
  message: string;
  reason: AvailabilityReason | "";
}

export function checkAvailability(accounts: AccountStore, name: string, seedSpelling = false): Availability {
  const lower = name.toLowerCase();
  if ((RESERVED_WORKSPACE_NAMES as readonly string[]).includes(lower))
    return { available: false, reason: "forbidden_reserved", message: `"${name}" is a reserved name` };
  if (lower.includes("blaxel"))
    return { available: false, reason: seedSpelling ? "forbidden_service" : "forbidden_blaxel", message: `"${name}" contains the service's brand name` };
  if (/^v\d+$/.test(lower)) return { available: false, reason: "forbidden_v_prefix", message: `"${name}" looks like an API version (v followed by digits)` };
  if (accounts.workspace(lower)) return { available: false, reason: "taken", message: `"${name}" is already taken` };
  return { available: true, message: "", reason: "" };
}
