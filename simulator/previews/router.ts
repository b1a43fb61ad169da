import type { IncomingMessage } from "node:http";
import { errors } from "../../src/errors.js";
import { edgeError, type ForwardPlan, type PreviewRouter } from "../proxy/index.js";
import type { ResourceStore, StoredResource } from "../store/resources.js";
import { cookieWithout, matchingToken, presentedToken, TOKEN_HEADER, TOKEN_PARAM, type TokenDoc } from "./tokens.js";
import { hostLabel, labelCandidates, prefixedPreviewFromPath, previewFromPath, previewHostLabel, withoutTokenParam, type PreviewAddress } from "./urls.js";
import type { AccountStore } from "../store/accounts.js";
import type { Clock } from "../../src/clock.js";

/**
 * Serves preview URLs (urls.ts): the preview's sandbox answers on
 * `spec.port` through its agent's /port/{n} route, or the sandbox API itself
 * for the ports the platform reserves for it (443, which sessions use, and
 * 8080). Public previews need no credential; private ones a live preview
 * token (tokens.ts), else 401. `requestHeaders` are added to what the app
 * receives and `responseHeaders` to what the caller gets; a CORS preflight is
 * answered from them when they carry Access-Control-* headers (the browser
 * sends no token on a preflight).
 */

interface PreviewSpec {
  port?: number;
  public?: boolean;
  prefixUrl?: string;
  expires?: string;
  requestHeaders?: Record<string, string>;
  responseHeaders?: Record<string, string>;
}

interface PreviewDoc {
  metadata: { name: string };
  spec: PreviewSpec;
}

/** Ports of the sandbox API itself (docs.blaxel.ai/Sandboxes/Ports: 443 "hosts the main sandbox API", 8080 too). */
const API_PORTS = new Set([443, 8080]);

type Deps = { resources: ResourceStore; accounts: AccountStore; clock: Clock };

/** Header maps as node:http keeps them: a preview's "Access-Control-Allow-Origin" replaces the app's. */
function lowerCased(headers: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
}

function isPreflight(req: IncomingMessage): boolean {
  return req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
}

export function createPreviewRouter(deps: Deps): PreviewRouter {
  /** Host label → where it last led; checked against the store on every hit. */
  const byLabel = new Map<string, PreviewAddress>();

  function fromHost(label: string, url: string): PreviewAddress | undefined {
    const rest = url.startsWith("/") ? url : `/${url}`;
    const known = byLabel.get(label);
    const still = known && deps.resources.get<PreviewDoc>(known.workspace, "preview", known.preview, known.sandbox);
    if (known && still && hostLabel(known.workspace, known.sandbox, known.preview, still.doc.spec.prefixUrl) === label) return { ...known, rest };
    byLabel.delete(label);
    const workspaces = deps.accounts.allWorkspaces().map((w) => w.name);
    for (const candidate of labelCandidates(label, workspaces)) {
      const hit =
        deps.resources.allOfKind<PreviewDoc>(candidate.workspace, ["preview"]).find((p) => p.doc.spec.prefixUrl === candidate.prefix) ??
        candidate.splits
          .map((s) => deps.resources.get<PreviewDoc>(candidate.workspace, "preview", s.preview, s.sandbox))
          .find((p) => p && !p.doc.spec.prefixUrl);
      if (!hit) continue;
      const address = { workspace: candidate.workspace, sandbox: hit.parent, preview: hit.name, rest: "/", cookiePath: "/" };
      byLabel.set(label, address);
      return { ...address, rest };
    }
    return undefined;
  }

  /** `/{workspace}/previews/{prefixUrl}/...`: the workspace's preview with that prefixUrl. */
  function fromPrefixPath(url: string): PreviewAddress | undefined {
    const at = prefixedPreviewFromPath(url);
    if (!at) return undefined;
    const hit = deps.resources.allOfKind<PreviewDoc>(at.workspace, ["preview"]).find((p) => p.doc.spec.prefixUrl === at.prefix);
    return hit && { workspace: at.workspace, sandbox: hit.parent, preview: hit.name, rest: at.rest, cookiePath: at.cookiePath };
  }

  function locate(req: IncomingMessage): PreviewAddress | undefined {
    const label = previewHostLabel(req.headers.host);
    return label ? fromHost(label, req.url ?? "/") : (previewFromPath(req.url ?? "/") ?? fromPrefixPath(req.url ?? "/"));
  }

  function checkToken(req: IncomingMessage, at: PreviewAddress): string | undefined {
    const presented = presentedToken(req);
    if (!presented) {
      throw edgeError(
        "AUTHENTICATION_REQUIRED",
        errors.unauthorized(`preview "${at.preview}" is private: send its token in the X-Blaxel-Preview-Token header or the ${TOKEN_PARAM} query parameter`),
      );
    }
    const tokens = deps.resources
      .list<TokenDoc>({ workspace: at.workspace, kind: "preview-token", parent: `${at.sandbox}/${at.preview}`, sort: "createdAt:asc" })
      .map((t) => t.doc);
    const valid = matchingToken(tokens, presented.value, deps.clock.now());
    if (!valid) throw edgeError("AUTHENTICATION_FAILED", errors.unauthorized(`preview "${at.preview}": the preview token is unknown, deleted or expired`));
    if (presented.from !== "query") return undefined;
    // A browser that came with ?bl_preview_token= gets a cookie, so the page's own requests carry the token too.
    const maxAge = Math.max(0, Math.floor((valid.expiresMs - deps.clock.now()) / 1000));
    return `${TOKEN_PARAM}=${presented.value}; Path=${at.cookiePath}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax`;
  }

  return {
    matches: (req) =>
      previewHostLabel(req.headers.host) !== undefined ||
      previewFromPath(req.url ?? "/") !== undefined ||
      prefixedPreviewFromPath(req.url ?? "/") !== undefined,
    plan(req): ForwardPlan {
      const at = locate(req);
      const item: StoredResource<PreviewDoc> | undefined = at && deps.resources.get<PreviewDoc>(at.workspace, "preview", at.preview, at.sandbox);
      if (!at || !item) throw edgeError("ROUTE_NOT_FOUND", errors.notFound(`no preview answers at ${req.headers.host ?? ""}${req.url ?? ""}`));
      const spec = item.doc.spec;
      const expires = spec.expires ? Date.parse(spec.expires) : NaN;
      if (Number.isFinite(expires) && expires <= deps.clock.now())
        throw edgeError("ROUTE_NOT_FOUND", errors.notFound(`preview "${at.preview}" expired at ${spec.expires}`));
      const replyHeaders: Record<string, string | string[]> = lowerCased(spec.responseHeaders);
      const cors = Object.keys(replyHeaders).some((h) => h.toLowerCase().startsWith("access-control-"));
      if (isPreflight(req) && cors)
        return {
          target: { workspace: at.workspace, sandbox: at.sandbox, path: "/" },
          audience: "app",
          platformCredential: false,
          answer: { status: 204, headers: spec.responseHeaders ?? {} },
        };
      const cookie = spec.public || isPreflight(req) ? undefined : checkToken(req, at);
      if (cookie) replyHeaders["set-cookie"] = cookie;
      const port = spec.port ?? 80;
      const rest = withoutTokenParam(at.rest);
      const api = API_PORTS.has(port);
      return {
        target: { workspace: at.workspace, sandbox: at.sandbox, path: api ? rest : `/port/${port}${rest}` },
        audience: api ? "api" : "app",
        platformCredential: false,
        replyHeaders,
        editRequest: (headers) => {
          delete headers[TOKEN_HEADER];
          const kept = cookieWithout(typeof headers.cookie === "string" ? headers.cookie : undefined, TOKEN_PARAM);
          if (kept === undefined) delete headers.cookie;
          else headers.cookie = kept;
          Object.assign(headers, lowerCased(spec.requestHeaders));
        },
      };
    },
  };
}
