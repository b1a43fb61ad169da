import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

/**
 * Header names a credential may arrive in. The SDK sends `X-Blaxel-Authorization`
 * (never `Authorization`); the seed document spells the brand `Service`.
 */
export const AUTH_HEADERS = ["authorization", "x-blaxel-authorization", "x-service-authorization"] as const;

/** The bearer token of a request, from the first auth header that carries one. */
export function bearerToken(headers: IncomingHttpHeaders): string | undefined {
  for (const name of AUTH_HEADERS) {
    const value = headers[name];
    const raw = Array.isArray(value) ? value[0] : value;
    if (!raw) continue;
    const match = /^Bearer\s+(.+)$/i.exec(raw.trim());
    if (match?.[1]) return match[1].trim();
  }
  return undefined;
}

/**
 * Constant-time comparison of secrets. Both sides are hashed first so the
 * comparison time does not leak the expected length either.
 */
export function secretsEqual(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost|::ffff:127\.\d+\.\d+\.\d+)$/i;

export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.test(host.replace(/^\[|\]$/g, ""));
}
