import { Router, json, type Request } from "express";
import { posix } from "node:path";
import { z } from "zod";
import { errors, fromFsError } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import { sandboxPathFromUrl } from "../http/sandbox-path-param.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { listDirectory } from "./entries.js";
import { OwnerNames } from "./owners.js";
import { removeDirectory } from "./remove.js";
import { writeDirectory, writeFile } from "./write.js";

const TreeBody = z.object({ files: z.record(z.string(), z.string()).optional() });

/**
 * `/filesystem/tree/{path}`: GET lists a directory, PUT writes
 * `{files: {relative path: content}}` under it, DELETE removes it. Tree paths
 * are always absolute (the reference daemon's rule; @blaxel/core's writeTree
 * sends its destination unencoded: `/filesystem/tree/` alone is `/`).
 * Other methods fall through to `/filesystem/{path}`, as in the reference.
 */
export function treeRouter(paths: SandboxPaths): Router {
  const router = Router();
  const owners = new OwnerNames();
  const jsonBody = json({ limit: "100mb", type: () => true });
  const rootOf = (req: Request) => paths.normalize(sandboxPathFromUrl(req.path));
  /** Lists through the held directory, as GET /filesystem does: a swapped path cannot list the outside. */
  const listPinned = (path: string) =>
    paths.use(path, { follow: true }, async ({ stat, pinned }) => {
      if (!pinned || !stat?.isDirectory()) throw errors.badRequest(`${path}: path is not a directory`);
      return listDirectory(path, pinned, owners).catch((err) => {
        throw fromFsError(err, "cannot list", path);
      });
    });

  router.get("/{*rest}", async (req, res) => {
    const path = rootOf(req);
    res.json(await listPinned(path));
  });

  router.put("/{*rest}", jsonBody, async (req, res) => {
    const root = rootOf(req);
    const { files = {} } = parse(TreeBody, req.body ?? {}, "body");
    // Every key is checked before anything is written: none may leave the tree's root.
    const targets = Object.entries(files).map(([key, content]) => {
      if (key.includes("\0")) throw errors.badRequest(`files: "${key}" must not contain NUL bytes`);
      const path = posix.join(root, key);
      if (path === root || path === `${root}/`) throw errors.badRequest(`files: "${key}" names the tree's root, not a file under it`);
      if (root !== "/" && !path.startsWith(`${root}/`)) throw errors.badRequest(`files: "${key}" leaves the tree's root ${root}`);
      return { path: paths.normalize(path), content };
    });
    await paths.use(root, { follow: true, createParents: true }, (target) => writeDirectory(target, 0o755));
    for (const { path, content } of targets) {
      // Each file is written atomically (temp, fsync, rename) through a pinned path; parents are created 0755.
      await paths.use(path, { follow: true, createParents: true }, (target) => writeFile(target, content));
    }
    res.json(await listPinned(root));
  });

  router.delete("/{*rest}", async (req, res) => {
    const path = rootOf(req);
    if (path === "/") throw errors.forbidden("path: cannot delete the sandbox root");
    await paths.use(path, { follow: false }, async ({ stat, dir, name }) => {
      if (!stat) throw errors.notFound(`cannot delete ${path}: no such file or directory (ENOENT)`);
      if (!stat.isDirectory()) throw errors.badRequest(`${path} is not a directory`);
      await removeDirectory({ dir, name }, path, queryBool(req.query.recursive));
    });
    res.json({ path, message: "Directory deleted successfully" });
  });

  return router;
}
