/**
 * One error type for both programs. Handlers throw `ApiError`s built by the
 * `errors` catalogue; one middleware per program renders them in that program's
 * wire shape (`{error}` on the agent, `{error, code, message}` on the simulator).
 */

/** Machine-readable codes; the simulator sends them as `error`, the agent logs them. */
export const ERROR_CODES = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  unprocessable: 422,
  too_many_requests: 429,
  internal: 500,
  not_implemented: 501,
  service_unavailable: 503,
  insufficient_storage: 507,
  invalid_api_version: 400,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class ApiError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  /** Extra fields merged into the error body (e.g. SandboxError's `details`). */
  readonly details?: Record<string, unknown>;
  /** Response headers to send with the error (e.g. `Connection: close`). */
  readonly headers?: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: { status?: number; details?: Record<string, unknown>; headers?: Record<string, string> } = {}) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.status = options.status ?? ERROR_CODES[code];
    this.details = options.details;
    this.headers = options.headers;
  }
}

export const errors = {
  badRequest: (message: string) => new ApiError("bad_request", message),
  unauthorized: (message = "missing or invalid credentials") => new ApiError("unauthorized", message),
  forbidden: (message: string) => new ApiError("forbidden", message),
  notFound: (message: string) => new ApiError("not_found", message),
  conflict: (message: string) => new ApiError("conflict", message),
  payloadTooLarge: (message: string) => new ApiError("payload_too_large", message, { headers: { Connection: "close" } }),
  rangeNotSatisfiable: (message: string, size: number) => new ApiError("range_not_satisfiable", message, { headers: { "Content-Range": `bytes */${size}` } }),
  unprocessable: (message: string) => new ApiError("unprocessable", message),
  tooManyRequests: (message: string) => new ApiError("too_many_requests", message),
  insufficientStorage: (message: string) => new ApiError("insufficient_storage", message),
  serviceUnavailable: (message: string) => new ApiError("service_unavailable", message),
  internal: (message: string) => new ApiError("internal", message),
};

const FS_ERRNO: Record<string, (message: string) => ApiError> = {
  ENOENT: errors.notFound,
  ENOTDIR: errors.badRequest,
  EISDIR: errors.badRequest,
  EEXIST: errors.conflict,
  ENOTEMPTY: errors.conflict,
  EBUSY: errors.conflict,
  EACCES: errors.forbidden,
  EPERM: errors.forbidden,
  EROFS: errors.forbidden,
  ENAMETOOLONG: errors.badRequest,
  ELOOP: errors.forbidden,
  EFBIG: errors.payloadTooLarge,
  ENOSPC: errors.insufficientStorage,
  EDQUOT: errors.insufficientStorage,
};

const FS_REASON: Record<string, string> = {
  ENOENT: "no such file or directory",
  ENOTDIR: "a parent of the path is not a directory",
  EISDIR: "is a directory",
  EEXIST: "already exists",
  ENOTEMPTY: "directory not empty",
  EBUSY: "resource busy",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENAMETOOLONG: "name too long",
  ELOOP: "too many levels of symbolic links",
  EFBIG: "file too large",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
};

/**
 * Maps a Node filesystem error to the ApiError a client should see, naming the
 * sandbox path (never the host path). Unknown errno values stay 500.
 */
export function fromFsError(err: unknown, action: string, sandboxPath: string): ApiError {
  if (err instanceof ApiError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const make = code ? FS_ERRNO[code] : undefined;
  if (!make || !code) return errors.internal(`${action} ${sandboxPath}: ${(err as Error)?.message ?? String(err)}`);
  return make(`${action} ${sandboxPath}: ${FS_REASON[code]} (${code})`);
}

export function isErrno(err: unknown, ...codes: string[]): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code !== undefined && codes.includes(code);
}
