import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { errors, type ApiError } from "../../src/errors.js";
import { paginates, type ApiVersion } from "../../src/versioning.js";
import type { Role } from "../store/accounts.js";
import { authenticateHeaders, requestedWorkspace, selectWorkspace, type Principal, type PrincipalSources } from "../auth/principal.js";
import { grants, type Scope } from "../auth/scopes.js";

/**
 * The operations table: every route is one entry `{id, method, path, scope,
 * handler}`. Handlers return data (or a Reply for another status); one
 * dispatcher authenticates, checks the scope and workspace, and writes the JSON.
 */
export type Method = "get" | "post" | "put" | "delete";

/** What a handler sees of the HTTP request. */
export interface RequestView {
  method: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

/**
 * One operation's call: the request and its caller, nothing else. What a handler uses besides (stores, clock,
 * runtimes) it was given when its route module's factory built it (operations.ts), never through this.
 */
export interface OpContext {
  req: RequestView;
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
  /** Path under /v0, e.g. `/sandboxes/:sandboxName`; the first segment is literal. */
  path: string;
  /**
   * The scope a credential needs (`admin` covers all): every operation names
   * one, `admin` where the seed has no scope for the resource.
   */
  scope: Scope;
  /** A narrower scope that allows this operation too, from its path parameters (a drive token: `drive:<name>`). */
  alsoGrantedBy?: (params: Record<string, string>) => string;
  /** "workspace" (default): needs a selected workspace; "account": any authenticated caller. */
  level?: "workspace" | "account";
  handler: (ctx: OpContext) => unknown;
  /** Rewrites every error of this operation (POST /sandboxes answers SandboxError). */
  errorShape?: (err: ApiError, req: RequestView) => ApiError;
}

export class Reply {
  constructor(
    readonly status: number,
    readonly body?: unknown,
    /** Headers of this reply beside the usual ones (X-Blaxel-Upload-Url). */
    readonly headers?: Record<string, string>,
  ) {}
}

/** A reply body already serialized as JSON (a list page assembled from cached item texts). */
export class RawJson {
  constructor(readonly text: string) {}
}

/** The authenticated caller of an operation (Dispatcher.authorize). */
export interface Caller {
  principal: Principal;
  workspace: string;
  role: Role | undefined;
}

export interface Match {
  op: Operation;
  params: Record<string, string>;
}

/**
 * Routes indexed by method, segment count and first segment, so a request
 * tests a handful of patterns; table order decides precedence among the
 * candidates (literal segments are listed first).
 */
export class Dispatcher {
  readonly #index = new Map<string, { op: Operation; segments: string[] }[]>();
  /** Authentication's sources (accounts, credentials, clock, JWT secret): all the dispatcher itself uses. */
  readonly #auth: PrincipalSources;

  constructor(auth: PrincipalSources, operations: readonly Operation[]) {
    this.#auth = auth;
    for (const op of operations) {
      const segments = op.path.split("/").slice(1);
      if (!segments[0] || segments[0].startsWith(":")) throw new Error(`${op.id}: a path must start with a literal segment`);
      const key = `${op.method.toUpperCase()} ${segments.length} ${segments[0]}`;
      let bucket = this.#index.get(key);
      if (!bucket) this.#index.set(key, (bucket = []));
      bucket.push({ op, segments });
    }
  }

  /** `path` is the raw (still percent-encoded) path below /v0. */
  match(method: string, path: string): Match | undefined {
    const parts = path.split("/").slice(1);
    if (parts.length > 1 && parts[parts.length - 1] === "") parts.pop(); // a trailing slash
    const candidates = this.#index.get(`${method} ${parts.length} ${parts[0]}`);
    for (const { op, segments } of candidates ?? []) {
      const params = matchSegments(segments, parts);
      if (params) return { op, params };
    }
    return undefined;
  }

  /**
   * Who may run a matched operation: the credential (401), its scope (403)
   * and its workspace (403). The front calls it before reading any body.
   */
  authorize({ op, params }: Match, headers: IncomingHttpHeaders, query: Record<string, unknown>): Caller {
    const principal = authenticateHeaders(this.#auth, headers);
    if (!grants(principal.scopes, op.scope, op.alsoGrantedBy?.(params))) throw errors.forbidden(`missing scope ${op.scope}`);
    let workspace = "";
    let role: Role | undefined;
    if ((op.level ?? "workspace") === "workspace") ({ workspace, role } = selectWorkspace(principal, requestedWorkspace(headers, query)));
    return { principal, workspace, role };
  }

  /** Runs a matched operation and writes its reply; throws ApiErrors for the caller to render (and shape). */
  run(
    match: Match,
    req: RequestView,
    res: ServerResponse,
    query: Record<string, unknown>,
    version: ApiVersion,
    caller = this.authorize(match, req.headers, query),
  ): void | Promise<void> {
    const { op, params } = match;
    const { principal, workspace, role } = caller;
    const ctx: OpContext = {
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
    const result = op.handler(ctx);
    // Handlers that wait on a sandbox's agent (create returns once it is healthy) return a promise.
    if (result instanceof Promise) return result.then((value) => send(res, value));
    send(res, result);
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

/**
 * Writes a reply with its headers in one writeHead of a flat list (Node's
 * fast path: no per-header setHeader bookkeeping), in the order the wire
 * always had: Cache-Control, Content-Type, Content-Length.
 */
export function send(res: ServerResponse, result: unknown): void {
  const reply = result instanceof Reply ? result : new Reply(200, result);
  if (reply.status === 204 || reply.body === undefined) {
    // end() without a body writes the headers itself (Content-Length: 0 where a body is allowed).
    res.statusCode = reply.status;
    res.setHeader("Cache-Control", "no-store");
    res.setHeader("Content-Type", JSON_TYPE);
    res.end();
    return;
  }
  const text = reply.body instanceof RawJson ? reply.body.text : JSON.stringify(reply.body);
  const extra = reply.headers ? Object.entries(reply.headers).flat() : [];
  res.writeHead(reply.status, ["Cache-Control", "no-store", "Content-Type", JSON_TYPE, "Content-Length", String(Buffer.byteLength(text)), ...extra]);
  res.end(text);
}

const JSON_TYPE = "application/json; charset=utf-8";
