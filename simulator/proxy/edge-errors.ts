import type { IncomingMessage } from "node:http";
import { ApiError } from "../../src/errors.js";

/**
 * Errors of sandbox and preview URLs in the shape the platform's edge gateway
 * answers them (control-plane.md §6): `{error: {code, message, status,
 * retryable, action, do_not, docs_url, origin, timestamp}}` and the header
 * `X-Blaxel-Error-Code`, so programs can key their retries on the code
 * (WORKLOAD_UNAVAILABLE: retry; WORKLOAD_NOT_FOUND: do not). The SDK reads
 * only the status (502/503/504 → SandboxGatewayError) and `error` (its
 * message quotes it).
 */

export type EdgeCode =
  | "ROUTE_NOT_FOUND"
  | "WORKLOAD_NOT_FOUND"
  | "WORKSPACE_NOT_FOUND"
  | "WORKLOAD_UNAVAILABLE"
  | "AUTHENTICATION_REQUIRED"
  | "AUTHENTICATION_FAILED"
  | "FORBIDDEN"
  | "BAD_REQUEST"
  | "INTERNAL_ERROR";

const ADVICE: Record<EdgeCode, { retryable: boolean; action: string; do_not: string }> = {
  ROUTE_NOT_FOUND: { retryable: false, action: "check the URL: no sandbox or preview answers at this address", do_not: "retry the same URL" },
  WORKLOAD_NOT_FOUND: {
    retryable: false,
    action: "create the sandbox (or check its name and workspace) before calling it",
    do_not: "retry: the sandbox does not exist",
  },
  WORKSPACE_NOT_FOUND: { retryable: false, action: "check the workspace in the URL", do_not: "retry: the workspace does not exist" },
  WORKLOAD_UNAVAILABLE: {
    retryable: true,
    action: "retry with backoff, or read the sandbox's status (it may be starting, restarting, archived or deactivated)",
    do_not: "assume the sandbox is gone",
  },
  AUTHENTICATION_REQUIRED: {
    retryable: false,
    action: "send X-Blaxel-Authorization: Bearer <api key> (or a preview token for a private preview)",
    do_not: "retry without credentials",
  },
  AUTHENTICATION_FAILED: { retryable: false, action: "send a valid, unexpired credential", do_not: "retry with the same credential" },
  FORBIDDEN: { retryable: false, action: "use a credential of the sandbox's workspace", do_not: "retry with the same credential" },
  BAD_REQUEST: { retryable: false, action: "fix the request", do_not: "retry unchanged" },
  INTERNAL_ERROR: { retryable: true, action: "retry; report it if it persists", do_not: "" },
};

const BY_STATUS: Record<number, EdgeCode> = {
  400: "BAD_REQUEST",
  401: "AUTHENTICATION_REQUIRED",
  403: "FORBIDDEN",
  404: "ROUTE_NOT_FOUND",
  503: "WORKLOAD_UNAVAILABLE",
};

/** An ApiError that names its edge code (details.edgeCode). */
export function edgeError(edgeCode: EdgeCode, base: ApiError): ApiError {
  return new ApiError(base.code, base.message, { status: base.status, headers: base.headers, details: { ...base.details, edgeCode } });
}

export function edgeCodeOf(err: ApiError, req?: IncomingMessage): EdgeCode {
  const named = err.details?.edgeCode;
  if (typeof named === "string" && named in ADVICE) return named as EdgeCode;
  if (err.status === 401 && req && hasCredential(req)) return "AUTHENTICATION_FAILED";
  return BY_STATUS[err.status] ?? "INTERNAL_ERROR";
}

function hasCredential(req: IncomingMessage): boolean {
  const h = req.headers;
  return (
    Boolean(h.authorization || h["x-blaxel-authorization"] || h["x-service-authorization"] || h["x-blaxel-preview-token"]) ||
    /[?&]bl_preview_token=/.test(req.url ?? "")
  );
}

/** The body and headers of an error of a sandbox or preview URL. */
export function edgeErrorReply(
  err: ApiError,
  req: IncomingMessage | undefined,
  now: number,
): { status: number; body: string; headers: Record<string, string> } {
  const code = edgeCodeOf(err, req);
  const advice = ADVICE[code];
  const body = JSON.stringify({
    error: {
      code,
      message: err.message,
      status: err.status,
      retryable: advice.retryable,
      action: advice.action,
      do_not: advice.do_not,
      docs_url: "https://docs.blaxel.ai/Sandboxes/Overview",
      origin: "sandbox-sim",
      timestamp: new Date(now).toISOString(),
    },
  });
  const headers: Record<string, string> = { "content-type": "application/json", "cache-control": "no-store", "x-blaxel-error-code": code, ...err.headers };
  if (advice.retryable && err.status === 503) headers["retry-after"] ??= "1";
  return { status: err.status, body, headers };
}
