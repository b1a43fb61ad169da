import { Router, json } from "express";
import { z } from "zod";
import { errors } from "../../src/errors.js";
import { parse } from "../../src/http.js";
import { receiveFormFile } from "../http/form-file.js";
import { isRawBody, receiveRawFile } from "../http/raw-file.js";
import { parsePermissions } from "../filesystem/permissions.js";
import type { MultipartService } from "./service.js";
import { sandboxPathFromUrl } from "../http/sandbox-path-param.js";

const InitiateBody = z.object({ permissions: z.union([z.string(), z.number()]).optional() });
const CompleteBody = z.object({
  parts: z.array(z.object({ partNumber: z.number().int().min(1).max(10_000), etag: z.string().min(1) })),
});

function partNumberOf(raw: unknown): number {
  if (raw === undefined || raw === "") throw errors.badRequest("partNumber: query parameter is required");
  if (typeof raw !== "string" || !/^\d+$/.test(raw)) throw errors.badRequest(`partNumber: must be an integer, got "${String(raw)}"`);
  const n = Number(raw);
  if (n < 1 || n > 10_000) throw errors.badRequest(`partNumber: must be between 1 and 10000, got ${n}`);
  return n;
}

/** The six S3-style multipart endpoints, wire-compatible with @blaxel/core's uploadWithMultipart. */
export function multipartRouter(service: MultipartService, maxPartSize: number): Router {
  const router = Router();
  const body = json({ limit: "4mb", type: () => true });

  router.post("/initiate/{*path}", body, async (req, res) => {
    const raw = sandboxPathFromUrl(req.path.slice("/initiate".length));
    const { permissions } = parse(InitiateBody, req.body ?? {}, "body");
    res.json(await service.initiate(raw, parsePermissions(permissions, 0o644)));
  });

  router.put("/:uploadId/part", async (req, res) => {
    const partNumber = partNumberOf(req.query.partNumber);
    // The SDK sends a form with a `file` field; a raw application/octet-stream body is the part itself.
    const result = await service.putPart(req.params.uploadId, partNumber, (write) =>
      isRawBody(req) ? receiveRawFile(req, { maxFileSize: maxPartSize, write }) : receiveFormFile(req, { field: "file", maxFileSize: maxPartSize, write }),
    );
    res.json(result);
  });

  router.post("/:uploadId/complete", body, async (req, res) => {
    const { parts } = parse(CompleteBody, req.body, "body");
    res.json(await service.complete(req.params.uploadId, parts));
  });

  router.delete("/:uploadId/abort", async (req, res) => {
    res.json(await service.abort(req.params.uploadId));
  });

  router.get("/:uploadId/parts", (req, res) => {
    res.json(service.listParts(req.params.uploadId));
  });

  router.get("/", (_req, res) => {
    res.json(service.listUploads());
  });

  return router;
}
