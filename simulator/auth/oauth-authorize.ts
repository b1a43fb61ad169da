import express, { type Response, type Router } from "express";
import { z } from "zod";
import { bearerToken } from "../../src/auth.js";
import { ApiError } from "../../src/errors.js";
import { randomToken } from "../../src/ids.js";
import { parse } from "../../src/http.js";
import { digest } from "./credentials.js";
import { OAUTH_BODY_LIMIT, oauthError, requestedScope } from "./oauth-errors.js";
import { authenticateHeaders, type Principal, type PrincipalSources } from "./principal.js";
import { redirectUriProblem } from "./redirect-uri.js";

/**
 * The authorization step of the authorization-code flow (RFC 6749 §4.1).
 * A code is never handed for a user merely named by `login_hint`, without a
 * credential:
 * - the client must be registered (seed `oauthClients`) and the redirect URI
 *   one of its exact URIs (omitted: its only one); otherwise a 400, never a
 *   redirect (§4.1.2.1), and never to a non-http(s) URI;
 * - the user proves who they are with a credential of their own: a user API
 *   key or access token as `Authorization: Bearer` on GET, or the simulator's
 *   login form, `POST /oauth/authorize` with the key in the form field
 *   `api_key` (never in a URL, where logs and Referer headers keep it);
 * - the code's scope is at most what that credential holds.
 * Without a login page, a missing credential is a 401 JSON saying how to log in.
 */
const CODE_TTL_MS = 10 * 60_000;

const AuthorizeFields = z.object({
  response_type: z.literal("code", { error: 'expected "code"' }),
  client_id: z.string().min(1, "required"),
  redirect_uri: z.string().optional(),
  scope: z.string().optional(),
  state: z.string().optional(),
  login_hint: z.string().optional(),
});
type AuthorizeFields = z.infer<typeof AuthorizeFields>;

const LoginForm = AuthorizeFields.extend({ api_key: z.string().optional() });

const HOW_TO_LOG_IN =
  "log in with a user credential: Authorization: Bearer <your API key> on GET /oauth/authorize, or POST /oauth/authorize with the form field api_key";

export function authorizeRouter(deps: PrincipalSources): Router {
  const router = express.Router();
  const form = [express.urlencoded({ extended: false, limit: OAUTH_BODY_LIMIT }), express.json({ limit: OAUTH_BODY_LIMIT })];

  router.get("/oauth/authorize", (req, res) => {
    const fields = parse(AuthorizeFields, req.query, "query");
    const redirectUri = registeredRedirect(deps, fields);
    authorize(deps, fields, redirectUri, res, () => authenticateHeaders(deps, req.headers));
  });

  router.post("/oauth/authorize", ...form, (req, res) => {
    const fields = parse(LoginForm, req.body ?? {}, "body");
    const redirectUri = registeredRedirect(deps, fields);
    const key = fields.api_key ?? bearerToken(req.headers);
    authorize(deps, fields, redirectUri, res, () => authenticateHeaders(deps, key ? { authorization: `Bearer ${key}` } : {}));
  });

  return router;
}

/** The client's redirect URI for this request; 400 (never a redirect) for an unknown client or a URI it did not register. */
function registeredRedirect(deps: PrincipalSources, fields: AuthorizeFields): string {
  const client = deps.credentials.oauthClient(fields.client_id);
  if (!client) throw oauthError(400, "invalid_client", `client_id: "${fields.client_id}" is not a registered OAuth client (seed oauthClients)`);
  if (fields.redirect_uri === undefined) {
    if (client.redirectUris.length !== 1) throw oauthError(400, "invalid_request", "redirect_uri: required (the client registered several)");
    return client.redirectUris[0]!;
  }
  const problem = redirectUriProblem(fields.redirect_uri);
  if (problem) throw oauthError(400, "invalid_request", `redirect_uri: ${problem}`);
  if (!client.redirectUris.includes(fields.redirect_uri))
    throw oauthError(400, "invalid_request", "redirect_uri: not one of the client's registered redirect URIs");
  return fields.redirect_uri;
}

function authorize(deps: PrincipalSources, fields: AuthorizeFields, redirectUri: string, res: Response, login: () => Principal): void {
  let user: Principal;
  try {
    user = login();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) throw oauthError(401, "login_required", `${err.message}: ${HOW_TO_LOG_IN}`);
    throw err;
  }
  if (user.type !== "user") throw oauthError(403, "access_denied", "a service account cannot authorize a client: it uses client_credentials");
  if (fields.login_hint && fields.login_hint.toLowerCase() !== user.email)
    throw oauthError(403, "access_denied", "login_hint: names another user than the credential's");
  const scope = grantedScope(user, fields.scope);
  const code = randomToken(24);
  deps.credentials.insertGrant({
    token_hash: digest(code),
    kind: "code",
    sub: user.sub,
    sub_type: "user",
    client_id: fields.client_id,
    redirect_uri: fields.redirect_uri ?? "",
    scope,
    expires_ms: deps.clock.now() + CODE_TTL_MS,
  });
  const target = new URL(redirectUri);
  target.searchParams.set("code", code);
  if (fields.state !== undefined) target.searchParams.set("state", fields.state);
  res
    .status(302)
    .set("Location", target.toString())
    .send(JSON.stringify({ code, state: fields.state }));
}

/** The requested scopes, each held by the credential (`admin` holds all); none requested: the credential's own. */
function grantedScope(user: Principal, requested: string | undefined): string {
  const held = user.scopes;
  if (requested === undefined || requested.trim() === "") return [...held].join(" ");
  const scope = requestedScope(requested);
  if (held.has("admin")) return scope;
  const missing = scope.split(" ").filter((s) => !held.has(s));
  if (missing.length) throw oauthError(403, "access_denied", `scope: the credential does not hold ${missing.join(", ")}`);
  return scope;
}
