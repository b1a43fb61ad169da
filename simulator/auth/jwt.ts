import { createHmac } from "node:crypto";
import { secretsEqual } from "../../src/auth.js";

/**
 * HS256 JWTs built with node:crypto. The SDK decodes access tokens (jwt-decode)
 * and refreshes when less than half their life is left, so `iat` and `exp`
 * must be numeric seconds (control-plane.md §5).
 */
export interface AccessClaims {
  iss: string;
  sub: string;
  sub_type: "user" | "service_account";
  scope: string;
  iat: number;
  exp: number;
  jti: string;
  workspace?: string;
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

export function signJwt(claims: AccessClaims, secret: Buffer): string {
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64(claims)}`;
  return `${body}.${createHmac("sha256", secret).update(body).digest("base64url")}`;
}

/** The claims of a well-signed HS256 token, or undefined. Expiry is the caller's check (it owns the clock). */
export function verifyJwt(token: string, secret: Buffer): AccessClaims | undefined {
  const parts = token.split(".");
  if (parts.length !== 3) return undefined;
  const [header, payload, signature] = parts as [string, string, string];
  const expected = createHmac("sha256", secret).update(`${header}.${payload}`).digest("base64url");
  if (!secretsEqual(signature, expected)) return undefined;
  try {
    const head = JSON.parse(Buffer.from(header, "base64url").toString("utf8")) as { alg?: string };
    if (head.alg !== "HS256") return undefined;
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as AccessClaims;
    if (typeof claims.sub !== "string" || typeof claims.exp !== "number" || typeof claims.iat !== "number") return undefined;
    return claims;
  } catch {
    return undefined;
  }
}

/** Tokens live two hours (docs: Security/Access-tokens). */
export const ACCESS_TOKEN_TTL_S = 7200;
