import { randomBytes, randomUUID } from "node:crypto";

/** Id factory, injected so tests can make ids deterministic. */
export type Ids = () => string;

export const uuidIds: Ids = () => randomUUID();

/** Deterministic ids for tests: `${prefix}-1`, `${prefix}-2`, ... */
export function sequentialIds(prefix = "id"): Ids {
  let n = 0;
  return () => `${prefix}-${++n}`;
}

/** A URL-safe random token (for secrets, api keys, temp-file suffixes). */
export function randomToken(bytes = 16): string {
  return randomBytes(bytes).toString("base64url");
}
