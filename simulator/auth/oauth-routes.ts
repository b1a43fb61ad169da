import express, { type Router } from "express";
import { z } from "zod";
import { secretsEqual } from "../../src/auth.js";
import { randomToken } from "../../src/ids.js";
import { parse } from "../../src/http.js";
import { digest, type SubjectType } from "./credentials.js";
import { ACCESS_TOKEN_TTL_S, signJwt } from "./jwt.js";
import { authorizeRouter } from "./oauth-authorize.js";
import { OAUTH_BODY_LIMIT, oauthError, requestedScope } from "./oauth-errors.js";
import { principalOf, type PrincipalSources } from "./principal.js";

/**
 * OAuth 2.0 endpoints (unauthenticated): POST /oauth/token for
 * client_credentials (Basic header or body, as the SDK and docs send it),
 * authorization_code (client_id required, redirect_uri as authorized) and
 * refresh_token; /oauth/authorize (oauth-authorize.ts) issues the codes.
 * Errors use the OAuth names in `error` (oauth-errors.ts).
 */
const REFRESH_TTL_MS = 30 * 24 * 3_600_000;

const TokenBody = z.object({
  grant_type: z.string({ error: "required" }),
  client_id: z.string().optional(),
  client_secret: z.string().optional(),
  code: z.string().optional(),
  redirect_uri: z.string().optional(),
  refresh_token: z.string().optional(),
  scope: z.string().optional(),
  code_verifier: z.string().optional(),
  device_code: z.string().optional(),
});

/** OAuth needs what authentication does (accounts, credentials, clock, JWT secret, principal cache): grants and clients live in the credential store. */
export function oauthRouter(deps: PrincipalSources): Router {
  const router = express.Router();

  const issue = (type: SubjectType, sub: string, scope: string, clientId: string, withRefresh: boolean) => {
    const now = deps.clock.now();
    const iat = Math.floor(now / 1000);
    const access = signJwt({ iss: "sandbox-sim", sub, sub_type: type, scope, iat, exp: iat + ACCESS_TOKEN_TTL_S, jti: randomToken(12) }, deps.jwtSecret);
    const body: Record<string, unknown> = { access_token: access, token_type: "Bearer", expires_in: ACCESS_TOKEN_TTL_S, scope };
    if (withRefresh) {
      const refresh = randomToken(32);
      deps.credentials.insertGrant({
        token_hash: digest(refresh),
        kind: "refresh",
        sub,
        sub_type: type,
        client_id: clientId,
        redirect_uri: "",
        scope,
        expires_ms: now + REFRESH_TTL_MS,
      });
      body.refresh_token = refresh;
    }
    return body;
  };

  router.post("/oauth/token", express.urlencoded({ extended: false, limit: OAUTH_BODY_LIMIT }), express.json({ limit: OAUTH_BODY_LIMIT }), (req, res) => {
    const body = parse(TokenBody, req.body ?? {}, "body");
    let reply: Record<string, unknown>;
    switch (body.grant_type) {
      case "client_credentials": {
        let clientId = body.client_id;
        let secret = body.client_secret;
        const basic = /^Basic\s+(.+)$/i.exec(req.headers.authorization ?? "");
        if (basic) {
          const decoded = Buffer.from(basic[1]!, "base64").toString("utf8");
          const colon = decoded.indexOf(":");
          if (colon > 0) [clientId, secret] = [decoded.slice(0, colon), decoded.slice(colon + 1)];
        }
        if (!clientId) throw oauthError(400, "invalid_request", "client_id: required (Basic header or body)");
        if (!secret) throw oauthError(400, "invalid_request", "client_secret: required (Basic header or body)");
        const sa = deps.credentials.serviceAccount(clientId);
        if (!sa || !secretsEqual(digest(secret), sa.secret_hash)) throw oauthError(401, "invalid_client", "unknown client or wrong secret");
        reply = issue("service_account", sa.client_id, requestedScope(body.scope), clientId, false);
        break;
      }
      case "authorization_code": {
        if (!body.code) throw oauthError(400, "invalid_request", "code: required");
        const grant = deps.credentials.takeGrant(body.code, "code");
        if (!grant || grant.expires_ms <= deps.clock.now()) throw oauthError(400, "invalid_grant", "code: unknown, used or expired");
        if (grant.redirect_uri && grant.redirect_uri !== body.redirect_uri)
          throw oauthError(400, "invalid_grant", "redirect_uri: does not match the authorization request");
        if (body.client_id !== grant.client_id) throw oauthError(400, "invalid_grant", "client_id: does not match the authorization request");
        if (!principalOf(deps, grant.sub_type, grant.sub)) throw oauthError(400, "invalid_grant", "the user no longer exists");
        reply = issue(grant.sub_type, grant.sub, grant.scope, grant.client_id, true);
        break;
      }
      case "refresh_token": {
        if (!body.refresh_token) throw oauthError(400, "invalid_request", "refresh_token: required");
        const grant = deps.credentials.takeGrant(body.refresh_token, "refresh");
        if (!grant || grant.expires_ms <= deps.clock.now()) throw oauthError(400, "invalid_grant", "refresh_token: unknown, revoked or expired");
        if (!principalOf(deps, grant.sub_type, grant.sub)) throw oauthError(400, "invalid_grant", "the subject no longer exists");
        reply = issue(grant.sub_type, grant.sub, grant.scope, grant.client_id, true);
        break;
      }
      default:
        throw oauthError(400, "unsupported_grant_type", `grant_type: unsupported "${body.grant_type}" (client_credentials, authorization_code, refresh_token)`);
    }
    res.send(JSON.stringify(reply));
  });

  router.use(authorizeRouter(deps));
  return router;
}
