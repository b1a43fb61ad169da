import { posix } from "node:path";

/** The reference daemon's download Content-Types, by extension; anything else is application/octet-stream. */
const BY_EXTENSION: Record<string, string> = {
  ".txt": "text/plain",
  ".log": "text/plain",
  ".html": "text/html",
  ".htm": "text/html",
  ".css": "text/css",
  ".js": "application/javascript",
  ".json": "application/json",
  ".xml": "application/xml",
  ".pdf": "application/pdf",
  ".zip": "application/zip",
  ".tar": "application/x-tar",
  ".gz": "application/gzip",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".gif": "image/gif",
  ".svg": "image/svg+xml",
};

/** Go's filepath.Ext is case-sensitive, and so is this: `.TXT` downloads as application/octet-stream there too. */
export function downloadContentType(path: string): string {
  return BY_EXTENSION[posix.extname(path)] ?? "application/octet-stream";
}
