import { ApiError } from "./errors.js";

/**
 * API versions of the control plane (`Blaxel-Version` / `Service-Version`).
 * Absent → the earliest stable one, as the real service does
 * (control-plane.md §4); each stable date also exists as `<date>.preview`.
 */
export const STABLE_VERSIONS = ["2026-04-16", "2026-04-20", "2026-04-28"] as const;
export const DEFAULT_VERSION = STABLE_VERSIONS[0];
/** From this date on, management lists answer `{data, meta}` and honour cursor/limit/sort/q. */
export const PAGINATION_VERSION = "2026-04-28";

export const VERSION_HEADERS = ["blaxel-version", "service-version"] as const;

export interface ApiVersion {
  /** As sent (or the default), e.g. `2026-04-28.preview`. */
  raw: string;
  /** The date part, comparable as a string. */
  date: string;
  preview: boolean;
}

export function validVersions(): string[] {
  return STABLE_VERSIONS.flatMap((v) => [v, `${v}.preview`]);
}

/** Resolves the header value; unknown values are a 400 `invalid_api_version` listing the valid ones. */
export function resolveVersion(value: string | undefined): ApiVersion {
  const raw = value?.trim() || DEFAULT_VERSION;
  const match = /^(\d{4}-\d{2}-\d{2})(\.preview)?$/.exec(raw);
  if (!match || !(STABLE_VERSIONS as readonly string[]).includes(match[1]!)) {
    throw new ApiError("invalid_api_version", `Unknown API version "${raw}". Valid versions: ${validVersions().join(", ")}`);
  }
  return { raw, date: match[1]!, preview: Boolean(match[2]) };
}

export function paginates(version: ApiVersion): boolean {
  return version.date >= PAGINATION_VERSION;
}
