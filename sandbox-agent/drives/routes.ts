import { Router, json } from "express";
import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse, queryBool } from "../../src/http.js";
import type { DriveService } from "./service.js";

const MountBody = z.object({
  driveName: z.string(),
  mountPath: z.string(),
  drivePath: z.string().optional(),
  readOnly: z.boolean().optional(),
  // Sent by newer SDKs for the reference's FUSE uid/gid mapping. Bind mounts
  // cannot map ids, so a non-empty value is refused rather than ignored.
  uidMap: z.string().optional(),
  gidMap: z.string().optional(),
});

/**
 * `DELETE /drives/mount/{mountPath}`: the SDK strips the leading slash and
 * percent-encodes the rest (`/mnt/data` → `mnt%2Fdata`); curl users write
 * `/drives/mount/mnt/data` or `/drives/mount//mnt/data`. All mean /mnt/data.
 */
export function mountPathFromUrl(rawRest: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(rawRest);
  } catch {
    throw errors.badRequest(`mountPath: invalid percent-encoding in "${rawRest}"`);
  }
  if (decoded.replace(/\/+/g, "") === "") throw errors.badRequest("mountPath: is required: DELETE /drives/mount/{mountPath}");
  return decoded.startsWith("/") ? decoded : `/${decoded}`;
}

/** The drives API, wire-compatible with @blaxel/core's `sandbox.drives`. */
export function drivesRouter(service: DriveService): Router {
  const router = Router();

  router.get("/mount", async (_req, res) => {
    res.json({ mounts: await service.list() });
  });

  router.post("/mount", json({ limit: "64kb", type: () => true }), async (req, res) => {
    const body = parse(MountBody, req.body ?? {}, "body");
    for (const field of ["uidMap", "gidMap"] as const) {
      if (body[field]) throw errors.badRequest(`${field}: uid/gid mapping is not supported by this agent's drives`);
    }
    res.json(await service.mount(body));
  });

  router.delete(["/mount", "/mount/{*rest}"], async (req, res) => {
    const mountPath = mountPathFromUrl(req.path.slice("/mount".length));
    res.json(await service.unmount(mountPath, queryBool(req.query.force)));
  });

  return router;
}
