import type { Request, RequestHandler, Response } from "express";
import { ApiError, errors } from "../../src/errors.js";
import { paginates, type ApiVersion } from "../../src/versioning.js";
import type { Role } from "../accounts/store.js";
import { authenticateHeaders, requestedWorkspace, selectWorkspace, type Principal } from "../auth/principal.js";
import { grants, type Scope } from "../auth/scopes.js";
import type { SimDeps } from "../deps.js";

/**
 * The operations table: every route is one entry `{id, method, path, scope,
 * handler}`. Handlers return data (or a Reply for another status); one adapter
 * authenticates, checks the scope and workspace, and writes the JSON.
 */
export type Method = "get" | "post" | "put" | "delete";

export interface OpContext {
  deps: SimDeps;
  req: Request;
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  version: ApiVersion;
  /** True from 2026-04-28: lists answer {data, meta}. */
  paginated: boolean;
  principal: Principal;
  /** The selected workspace ("" for account-level operations). */
  workspace: string;
  role: Role | undefined;
  /** Admin of the selected workspace (account admins and service accounts included). */
  isAdmin: boolean;
  /** Who to write in createdBy/updatedBy. */
  actor: string;
}

export interface Operation {
  /** SDK function name, e.g. `listSandboxes`. */
  id: string;
  method: Method;
  /** Express path under /v0, e.g. `/sandboxes/:sandboxName`. */
  path: string;
  scope?: Scope;
  /** "workspace" (default): needs a selected workspace; "account": any authenticated caller. */
  level?: "workspace" | "account";
  handler: (ctx: OpContext) => unknown;
  /** Rewrites every error of this operation (POST /sandboxes answers SandboxError). */
  errorShape?: (err: ApiError, req: Request) => ApiError;
}

export class Reply {
  constructor(
    readonly status: number,
    readonly body?: unknown,
  ) {}
}

/**
 * One handler dispatching the whole table. Routes are indexed by method,
 * segment count and first segment, so a request tests a handful of patterns
 * instead of walking ~170 Express layers; table order still decides
 * precedence among the candidates (literal segments are listed first).
 */
export function buildRouter(deps: SimDeps, operations: readonly Operation[]): RequestHandler {
  const index = new Map<string, { op: Operation; segments: string[] }[]>();
  for (const op of operations) {
    const segments = op.path.split("/").slice(1);
    const key = `${op.method.toUpperCase()} ${segments.length} ${segments[0]}`;
    if (segments[0]!.startsWith(":")) throw new Error(`${op.id}: a path must start with a literal segment`);
    let bucket = index.get(key);
    if (!bucket) index.set(key, (bucket = []));
    bucket.push({ op, segments });
  }
  return (req, res, next) => {
    const parts = req.path.split("/").slice(1);
    if (parts.length > 1 && parts[parts.length - 1] === "") parts.pop(); // a trailing slash, as Express allows
    const candidates = index.get(`${req.method} ${parts.length} ${parts[0]}`);
    if (!candidates) return next();
    for (const { op, segments } of candidates) {
      const params = matchSegments(segments, parts);
      if (!params) continue;
      if (!op.errorShape) return run(op, req, res, params);
      try {
        return run(op, req, res, params);
      } catch (err) {
        throw op.errorShape(err instanceof ApiError ? err : errors.internal("internal error"), req);
      }
    }
    next();
  };

  function run(op: Operation, req: Request, res: Response, params: Record<string, string>): void {
    const principal = authenticateHeaders(deps, req.headers);
    if (!grants(principal.scopes, op.scope)) throw errors.forbidden(`missing scope ${op.scope}`);
    const query = req.query as Record<string, unknown>;
    let workspace = "";
    let role: Role | undefined;
    if ((op.level ?? "workspace") === "workspace") ({ workspace, role } = selectWorkspace(principal, requestedWorkspace(req.headers, query)));
    const version = res.locals.apiVersion as ApiVersion;
    const ctx: OpContext = {
      deps,
      req,
      params,
      query,
      body: req.body,
      version,
      paginated: paginates(version),
      principal,
      workspace,
      role,
      isAdmin: role === "admin",
      actor: principal.email ?? principal.sub,
    };
    send(res, op.handler(ctx));
  }
}

function matchSegments(pattern: string[], parts: string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    const value = parts[i]!;
    if (p.startsWith(":")) {
      if (value === "") return undefined;
      try {
        params[p.slice(1)] = decodeURIComponent(value);
      } catch {
        throw errors.badRequest(`path: malformed percent-encoding in "${value}"`);
      }
    } else if (p !== value) return undefined;
  }
  return params;
}

export function send(res: Response, result: unknown): void {
  const reply = result instanceof Reply ? result : new Reply(200, result);
  res.statusCode = reply.status;
  if (reply.status === 204 || reply.body === undefined) {
    res.end();
    return;
  }
  const text = JSON.stringify(reply.body);
  res.setHeader("Content-Length", Buffer.byteLength(text));
  res.end(text);
}
