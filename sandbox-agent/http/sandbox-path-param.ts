import { errors } from "../../src/errors.js";

/**
 * The sandbox path carried in the rest of a URL, raw (still percent-encoded).
 * @blaxel/core sends `encodeURIComponent(path)` (`/filesystem/%2Ftmp%2Fx`);
 * curl users write `/filesystem/tmp/x`; writeBinary builds `/filesystem//tmp/x`.
 * All three mean /tmp/x: the path is always absolute from the sandbox root.
 * (The reference daemon treats a path without `%2F` as relative to $WORKDIR;
 * we do not, so the same URL always names the same file.)
 */
export function sandboxPathFromUrl(rawRest: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(rawRest);
  } catch {
    throw errors.badRequest(`path: invalid percent-encoding in "${rawRest}"`);
  }
  return decoded.startsWith("/") ? decoded : `/${decoded}`;
}
