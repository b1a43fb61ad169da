import { Router, json, type Request, type Response } from "express";
import { promises as fsp } from "node:fs";
import { z } from "zod";
import { errors, fromFsError } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import { receiveFormFile } from "../http/form-file.js";
import { isRawBody, receiveRawFile } from "../http/raw-file.js";
import { sandboxPathFromUrl } from "../http/sandbox-path-param.js";
import type { Pinned, SandboxPaths } from "../paths/sandbox-path.js";
import { download } from "./download.js";
import { fileEntry, listDirectory } from "./entries.js";
import { OwnerNames } from "./owners.js";
import { parsePermissions } from "./permissions.js";
import { removeDirectory } from "./remove.js";
import { writeDirectory, writeFile } from "./write.js";

/** Reading a file into a JSON string beyond this is refused: download it instead. */
export const MAX_JSON_READ_BYTES = 64 * 1024 * 1024;

const WriteBody = z.object({
  content: z.string().optional(),
  isDirectory: z.boolean().optional(),
  permissions: z.union([z.string(), z.number()]).optional(),
});

/**
 * Download mode as the reference daemon decides it: `?download=true`, an
 * Accept naming application/octet-stream, or an Accept that names none of the
 * JSON types (e.g. text/plain). No Accept at all means JSON.
 */
function wantsDownload(req: Request): boolean {
  if (queryBool(req.query.download)) return true;
  const accept = req.headers.accept;
  if (!accept) return false;
  if (accept.includes("application/octet-stream")) return true;
  return !accept.includes("application/json") && !accept.includes("*/*");
}

function isMultipart(req: Request): boolean {
  return /^multipart\/form-data/i.test(req.headers["content-type"] ?? "");
}

/** GET, PUT and DELETE of `/filesystem/{path}`, as @blaxel/core's sandbox.fs uses them. */
export function filesystemRouter(paths: SandboxPaths): Router {
  const router = Router();
  const owners = new OwnerNames();
  const jsonBody = json({ limit: "100mb", type: () => true });
  const pathOf = (req: Request) => paths.normalize(sandboxPathFromUrl(req.path));

  router.get("/{*rest}", async (req, res) => {
    const path = pathOf(req);
    await paths.use(path, { follow: true }, async (target) => {
      const { stat, pinned } = target;
      if (!stat || !pinned) throw errors.notFound(`cannot read ${path}: no such file or directory (ENOENT)`);
      if (stat.isDirectory()) {
        res.json(
          await listDirectory(path, pinned, owners).catch((err) => {
            throw fromFsError(err, "cannot list", path);
          }),
        );
        return;
      }
      if (!stat.isFile()) throw errors.badRequest(`${path} is not a regular file`);
      if (wantsDownload(req)) return download(req, res, target);
      if (stat.size > MAX_JSON_READ_BYTES) {
        throw errors.payloadTooLarge(`${path} is ${stat.size} bytes, too large for a JSON read: download it with Accept: application/octet-stream`);
      }
      const content = await fsp.readFile(pinned, "utf8").catch((err) => {
        throw fromFsError(err, "cannot read", path);
      });
      res.json({ ...fileEntry(path, stat, owners), content });
    });
  });

  router.put(
    "/{*rest}",
    (req, res, next) => (isMultipart(req) || isRawBody(req) ? next() : jsonBody(req, res, next)),
    async (req, res) => {
      const path = pathOf(req);
      if (path === "/") throw errors.badRequest("path: cannot write the sandbox root");
      // Parents are created and held open as the walk goes: the write lands in the directory that was checked.
      await paths.use(path, { follow: true, createParents: true }, (target) => put(req, res, target));
    },
  );

  async function put(req: Request, res: Response, target: Pinned): Promise<void> {
    const path = target.sandboxPath;
    if (isRawBody(req)) {
      // The body is the file (curl -T); ?permissions= sets its mode.
      const mode = req.query.permissions === undefined ? undefined : parsePermissions(String(req.query.permissions), 0o644);
      const size = await receiveRawFile(req, { write: (file) => writeFile(target, file, mode) });
      res.json({ message: "Binary file uploaded successfully", path, size });
      return;
    }
    if (isMultipart(req)) {
      let mode: number | undefined;
      const size = await receiveFormFile(req, {
        field: "file",
        onField: (name, value) => {
          if (name === "permissions") mode = parsePermissions(value, 0o644);
        },
        write: (file) => writeFile(target, file, mode),
      });
      res.json({ message: "Binary file uploaded successfully", path, size });
      return;
    }
    const body = parse(WriteBody, req.body ?? {}, "body");
    if (body.isDirectory) {
      await writeDirectory(target, parsePermissions(body.permissions, 0o755));
      res.json({ message: "Directory created successfully", path });
      return;
    }
    const mode = body.permissions === undefined ? undefined : parsePermissions(body.permissions, 0o644);
    const size = await writeFile(target, body.content ?? "", mode);
    res.json({ message: "File created/updated successfully", path, size });
  }

  router.delete("/{*rest}", async (req, res) => {
    const path = pathOf(req);
    if (path === "/") throw errors.forbidden("path: cannot delete the sandbox root");
    await paths.use(path, { follow: false }, async ({ stat, entryPath, dir, name }) => {
      if (!stat) throw errors.notFound(`cannot delete ${path}: no such file or directory (ENOENT)`);
      if (stat.isDirectory()) {
        await removeDirectory({ dir, name }, path, queryBool(req.query.recursive));
        res.json({ message: "Directory deleted successfully", path });
        return;
      }
      await fsp.unlink(entryPath).catch((err) => {
        throw fromFsError(err, "cannot delete", path);
      });
      res.json({ message: "File deleted successfully", path });
    });
  });

  return router;
}
