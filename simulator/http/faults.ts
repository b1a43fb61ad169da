import { ApiError, ERROR_CODES, type ErrorCode } from "../../src/errors.js";
import type { TestHooksState } from "./test-hooks-state.js";

const CODE_BY_STATUS = new Map<number, ErrorCode>(
  Object.entries(ERROR_CODES)
    .filter(([code]) => code !== "invalid_api_version")
    .map(([code, status]) => [status, code as ErrorCode]),
);

function injected(status: number): ApiError {
  const code = CODE_BY_STATUS.get(status) ?? (status >= 500 ? "internal" : "bad_request");
  return new ApiError(code, `injected fault (status ${status})`, { status });
}

/**
 * Fault injection (test hooks only): `Prefer: code=503` fails that one request
 * (Prism's convention); rules `{method, path, status, times}` fail matching
 * requests, `times` counting down. /health and /_sim/* are never failed.
 */
export function injectedFault(state: TestHooksState, method: string, path: string, prefer: string | string[] | undefined): ApiError | undefined {
  if (!state.enabled || path.startsWith("/_sim/") || path === "/health") return undefined;
  const wanted = /(?:^|[,;\s])code=(\d{3})/.exec(String(prefer ?? ""));
  if (wanted) {
    const status = Number(wanted[1]);
    if (status >= 400 && status <= 599) return injected(status);
  }
  const rules = state.faults;
  const index = rules.findIndex(
    (r) => (!r.method || r.method.toUpperCase() === method) && (!r.path || (r.path.endsWith("*") ? path.startsWith(r.path.slice(0, -1)) : r.path === path)),
  );
  if (index < 0) return undefined;
  const rule = rules[index]!;
  if (rule.times !== undefined) {
    rule.times -= 1;
    if (rule.times <= 0) rules.splice(index, 1);
  }
  return injected(rule.status);
}
