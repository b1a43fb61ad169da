import type { RequestHandler } from "express";

/**
 * `/filesystem%2Ftmp/x` — the route's own separating slash percent-encoded,
 * as the reference daemon's integration tests write absolute paths — means
 * `/filesystem/%2Ftmp/x`, i.e. the same absolute path /tmp/x; so does the tree
 * route's `/filesystem/tree%2Ftmp/x` (their Go client's EncodeTreePath). Go's router
 * matches on the decoded path, Express on the raw one, so the URL is
 * rewritten before routing. Lowercase `%2f` is taken too.
 */
const ENCODED_SEPARATOR =
  /^\/(filesystem\/tree|filesystem|filesystem-find|filesystem-search|filesystem-content-search|watch\/filesystem|filesystem-multipart\/initiate)%2F/i;

export function encodedSeparator(): RequestHandler {
  return (req, _res, next) => {
    const match = ENCODED_SEPARATOR.exec(req.url);
    if (match) req.url = `/${match[1]}/${req.url.slice(match[0].length - 3)}`;
    next();
  };
}
