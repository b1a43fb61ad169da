import type { Page } from "../../src/pagination.js";
import { RawJson } from "../http/operation.js";

/** Removes the simulator's bookkeeping (keys starting with "__") before a document leaves the server. */
export function publicView<T>(doc: T): T {
  if (!doc || typeof doc !== "object") return doc;
  const src = doc as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  // for-in over own keys: no [key, value] array per key (every item of every list page comes through here).
  for (const k in src) if (Object.hasOwn(src, k) && !k.startsWith("__")) out[k] = src[k];
  return out as T;
}

/**
 * A list whose items are already JSON texts (ResourceStore.renderedJson), as
 * the reply JSON.stringify would give for the same items: a bare array, or
 * {data, meta}.
 */
export function listJson(list: string[] | Page<string>): RawJson {
  if (Array.isArray(list)) return new RawJson(`[${list.join(",")}]`);
  return new RawJson(`{"data":[${list.data.join(",")}],"meta":${JSON.stringify(list.meta)}}`);
}

/**
 * A document's cached JSON text with read-time fields added, as
 * JSON.stringify({...rendered, ...live}) would write it when every live
 * field is new to the document (they go last, in order); undefined when one
 * replaces a field of the document, for the caller to render whole.
 */
export function withLiveFields(text: string, doc: object, live: Record<string, unknown> | undefined): string | undefined {
  if (!live) return text;
  for (const key in live) if (Object.hasOwn(doc, key)) return undefined;
  const fields = JSON.stringify(live);
  if (fields === "{}") return text;
  if (text === "{}") return fields;
  if (!text.startsWith("{")) return undefined;
  return `${text.slice(0, -1)},${fields.slice(1)}`;
}

export const MASK = "***";

/** Env arrays `[{name, value, secret}]`: values of secret entries masked unless shown. */
export function maskEnvs(envs: unknown, show: boolean): unknown {
  if (show || !Array.isArray(envs)) return envs;
  return envs.map((e) => (e && typeof e === "object" && (e as { secret?: boolean }).secret ? { ...e, value: MASK } : e));
}

/** Maps `{key: value}`: every value masked unless shown. */
export function maskMap(map: unknown, show: boolean): unknown {
  if (show || !map || typeof map !== "object") return map;
  return Object.fromEntries(Object.keys(map).map((k) => [k, MASK]));
}

/** `configurations {key: {secret, value}}`: secret values masked unless shown. */
export function maskConfigurations(map: unknown, show: boolean): unknown {
  if (show || !map || typeof map !== "object") return map;
  return Object.fromEntries(
    Object.entries(map as Record<string, { secret?: boolean; value?: string }>).map(([k, v]) => [k, v?.secret ? { ...v, value: MASK } : v]),
  );
}

/**
 * A client that reads a resource (secrets masked) and sends it back whole on
 * PUT would overwrite its secrets with "***". A masked value sent back keeps
 * the stored one: strings at the same path, and entries of `[{name, value}]`
 * arrays matched by name.
 */
export function keepMaskedSecrets(next: unknown, previous: unknown): void {
  if (!next || typeof next !== "object" || !previous || typeof previous !== "object") return;
  if (Array.isArray(next)) {
    if (!Array.isArray(previous)) return;
    next.forEach((item, i) => {
      const name = (item as { name?: unknown } | null)?.name;
      const match = typeof name === "string" ? previous.find((p) => (p as { name?: unknown } | null)?.name === name) : previous[i];
      keepMaskedSecrets(item, match);
    });
    return;
  }
  const prev = previous as Record<string, unknown>;
  for (const [key, value] of Object.entries(next as Record<string, unknown>)) {
    if (value === MASK && typeof prev[key] === "string") (next as Record<string, unknown>)[key] = prev[key];
    else keepMaskedSecrets(value, prev[key]);
  }
}
