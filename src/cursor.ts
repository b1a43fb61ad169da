import { createHmac, randomBytes } from "node:crypto";
import { errors } from "./errors.js";
import { secretsEqual } from "./auth.js";

/**
 * Opaque, tamper-proof pagination cursors. A cursor carries the position
 * (whatever the list needs: last sort key, offset...), the hash of the query
 * it belongs to and its issue time, signed with HMAC-SHA256. Reusing it with
 * another query, editing it, or presenting it after `maxAgeMs` is a 400.
 */
export interface CursorCodecOptions {
  /** HMAC key; random per process when absent (cursors then die with the process). */
  secret?: string | Buffer;
  maxAgeMs?: number;
  now?: () => number;
}

export class CursorCodec {
  readonly #secret: Buffer;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  readonly #bindingHashes = new Map<string, string>();
  /** Hashes by binding object: a list page decodes its cursor and encodes the next one with the same object. */
  readonly #bindingHashesByObject = new WeakMap<object, string>();
  /** Cursors this codec signed, with their JSON payload: authentic by construction, no HMAC to check on decode. */
  readonly #issued = new Map<string, string>();

  constructor(options: CursorCodecOptions = {}) {
    this.#secret = options.secret === undefined ? randomBytes(32) : Buffer.from(options.secret);
    this.#maxAgeMs = options.maxAgeMs ?? 24 * 3_600_000;
    this.#now = options.now ?? Date.now;
  }

  /** `binding` is any JSON value describing the query (workspace, filters, sort...); an object must not change once passed. */
  encode(position: unknown, binding: unknown): string {
    const json = JSON.stringify({ p: position, b: this.#bindingHash(binding), t: this.#now() });
    const payload = Buffer.from(json).toString("base64url");
    const cursor = `${payload}.${this.#sign(payload)}`;
    // Clients walk lists page by page: the next request usually brings this very cursor back.
    if (this.#issued.size >= 10_000) this.#issued.clear();
    this.#issued.set(cursor, json);
    return cursor;
  }

  decode<T = unknown>(cursor: string, binding: unknown, field = "cursor"): T {
    let body: { p: T; b: string; t: number };
    const issued = this.#issued.get(cursor);
    if (issued !== undefined) body = JSON.parse(issued);
    else {
      const [payload, signature, extra] = cursor.split(".");
      if (!payload || !signature || extra !== undefined || !secretsEqual(signature, this.#sign(payload))) {
        throw errors.badRequest(`${field}: invalid cursor`);
      }
      try {
        body = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
      } catch {
        throw errors.badRequest(`${field}: invalid cursor`);
      }
    }
    if (body.b !== this.#bindingHash(binding)) throw errors.badRequest(`${field}: cursor belongs to a different query`);
    if (this.#now() - body.t > this.#maxAgeMs) throw errors.badRequest(`${field}: cursor expired`);
    return body.p;
  }

  #sign(payload: string): string {
    return createHmac("sha256", this.#secret).update(payload).digest("base64url");
  }

  #bindingHash(binding: unknown): string {
    const byObject = binding !== null && typeof binding === "object";
    if (byObject) {
      const known = this.#bindingHashesByObject.get(binding);
      if (known !== undefined) return known;
    }
    const text = stableStringify(binding);
    let hash = this.#bindingHashes.get(text);
    if (hash === undefined) {
      hash = createHmac("sha256", this.#secret).update(text).digest("base64url").slice(0, 22);
      // A page both decodes and encodes under the same binding, and clients walk lists page after page.
      if (this.#bindingHashes.size >= 1_000) this.#bindingHashes.clear();
      this.#bindingHashes.set(text, hash);
    }
    if (byObject) this.#bindingHashesByObject.set(binding, hash);
    return hash;
  }
}

/** JSON with object keys sorted, so equal queries hash equally. */
export function stableStringify(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(",")}]`;
  if (value && typeof value === "object") {
    // One pass over the sorted keys (a query's binding is hashed on every list page).
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    let text = "{";
    for (const k of keys) {
      const v = record[k];
      if (v === undefined) continue;
      if (text.length > 1) text += ",";
      text += `${JSON.stringify(k)}:${stableStringify(v)}`;
    }
    return `${text}}`;
  }
  return JSON.stringify(value ?? null);
}
