/**
 * Image references as sandboxes name them (`spec.runtime.image`): an
 * optional registry host, a repository path and a tag or digest. The SDK
 * passes hub images as `blaxel/base-image:latest`; the code interpreter as
 * `blaxel/jupyter-server`.
 */

export interface ImageRef {
  /** Registry host when the reference names one (e.g. ghcr.io, localhost:5000). */
  registry?: string;
  /** Repository path without the registry, e.g. "blaxel/base-image", "node". */
  repository: string;
  tag: string;
  digest?: string;
}

export class ImageRefError extends Error {}

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const DIGEST = /^sha256:[a-f0-9]{64}$/;

export function parseImageRef(input: string): ImageRef {
  const ref = input.trim();
  if (!ref) throw new ImageRefError("the image name is empty");
  let rest = ref;
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at !== -1) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw new ImageRefError(`"${input}": the digest must be sha256:<64 hex digits>`);
  }
  let tag = "latest";
  const lastSlash = rest.lastIndexOf("/");
  const colon = rest.lastIndexOf(":");
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw new ImageRefError(`"${input}": invalid tag "${tag}"`);
  }
  const parts = rest.split("/");
  let registry: string | undefined;
  // A first component with a dot, a colon or "localhost" is a registry host (Docker's rule).
  if (parts.length > 1 && (/[.:]/.test(parts[0]!) || parts[0] === "localhost")) registry = parts.shift();
  if (parts.length === 0 || !parts.every((p) => COMPONENT.test(p)))
    throw new ImageRefError(`"${input}": invalid repository name (lowercase letters, digits and . _ - separators)`);
  return { registry, repository: parts.join("/"), tag, digest };
}

/** The canonical text of a reference: registry/repository:tag[@digest]. */
export function formatImageRef(ref: ImageRef): string {
  return `${ref.registry ? `${ref.registry}/` : ""}${ref.repository}:${ref.tag}${ref.digest ? `@${ref.digest}` : ""}`;
}

/** A directory name for a reference in the store (reversible, no "/" and no leading dot). */
export function storeKey(ref: ImageRef | string): string {
  const text = typeof ref === "string" ? ref : formatImageRef(ref);
  return text.replace(/[^A-Za-z0-9._-]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`).replace(/^\./, "%2e");
}
