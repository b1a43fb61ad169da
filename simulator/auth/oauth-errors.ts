import { ApiError } from "../../src/errors.js";
import { parseScopeList } from "./scopes.js";

/** OAuth bodies are a few fields: read before any credential is checked, they stay small. */
export const OAUTH_BODY_LIMIT = 16 * 1024;

/** OAuth names in `error` (the SDK throws `new Error(body.error)`), inside the simulator's {error, code, message}. */
export const oauthError = (status: number, error: string, description: string) =>
  new ApiError(status === 401 ? "unauthorized" : status === 403 ? "forbidden" : "bad_request", description, {
    status,
    details: { error, error_description: description },
  });

/** A space-separated scope request: unknown values are a 400 naming them; none means `admin`. */
export function requestedScope(value: string | undefined): string {
  const { scopes, unknown } = parseScopeList(value);
  if (unknown.length) throw oauthError(400, "invalid_scope", `scope: unknown scope ${unknown.map((s) => `"${s}"`).join(", ")}`);
  return scopes.length ? scopes.join(" ") : "admin";
}
