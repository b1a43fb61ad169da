import type { Request, Response, NextFunction } from "express";
import { errors } from "../../src/errors.js";
import type { SandboxResourceDeps } from "./runtime.js";
import type { ImageUploads } from "./image-uploads.js";

/**
 * `PUT /uploads/{token}`: where X-Blaxel-Upload-Url points (uploads.ts). No credential, as the platform's
 * presigned storage URL: the token is one, used once. Answers 200 once the zip is stored; the build goes on.
 */
export function uploadHandler(deps: SandboxResourceDeps, uploads: ImageUploads) {
  return (req: Request, res: Response, next: NextFunction) => {
    uploads.receive(deps, String(req.params.token ?? ""), req).then(
      () => res.status(200).send(JSON.stringify({ status: "uploaded" })),
      (err: unknown) => next(err),
    );
  };
}
