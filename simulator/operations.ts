import { accountOperations } from "./accounts/routes.js";
import { serviceAccountOperations } from "./accounts/service-accounts.js";
import type { SimDeps } from "./deps.js";
import type { Operation } from "./http/operation.js";
import { imageOperations } from "./images/routes.js";
import { startImagePush } from "./images/image-push.js";
import { buildLogOperations } from "./images/build-logs.js";
import { Reply } from "./http/operation.js";
import type { ImageUploads } from "./sandboxes/image-uploads.js";
import { jobExecutionOperations } from "./jobs/routes.js";
import { catalogueOperations } from "./resources/catalogue.js";
import { customDomainOperations } from "./resources/custom-domain-routes.js";
import { networkConfigOperations } from "./resources/network-config-routes.js";
import { revisionOperations } from "./resources/revision-routes.js";
import { storageOperations } from "./resources/storage-routes.js";
import { crudOperations } from "./resources/crud.js";
import { RESOURCE_KINDS } from "./resource-kinds.js";
import { sandboxOperations } from "./sandboxes/routes.js";
import { snapshotOperations } from "./sandboxes/snapshots.js";
import { scheduleOperations } from "./schedules/routes.js";

/**
 * The operations table: every control-plane route, by SDK operation id, built once from the dependencies the
 * composition root assembled. Each route module's factory takes only the pieces it names (its own Pick of
 * SimDeps) and its handlers close over them: no handler reaches the whole set through its request context.
 * Specific routes come first (literal segments such as /sandboxes/by-external-id
 * must win over /sandboxes/:name), then the table-driven CRUD of every kind,
 * then catalogues (GET /integrations/:name must come after /integrations/connections).
 */
export function allOperations(deps: SimDeps, uploads: ImageUploads): Operation[] {
  return [
    ...accountOperations(deps),
    ...serviceAccountOperations(deps),
    ...sandboxOperations(deps, uploads),
    ...snapshotOperations(deps),
    ...scheduleOperations(deps.schedules, deps),
    ...jobExecutionOperations(deps),
    // `bl push`: the upload URL comes from the sandbox uploads, the build is the image push's (images/image-push.ts).
    ...imageOperations(deps, (ctx) => {
      let reply: Record<string, unknown> = {};
      const url = uploads.pushImage(deps, ctx, (store) => {
        const push = startImagePush(deps, ctx, store);
        reply = push.reply;
        return push;
      });
      return new Reply(200, reply, { "X-Blaxel-Upload-Url": url });
    }),
    ...buildLogOperations(deps),
    ...revisionOperations(deps),
    ...customDomainOperations(deps),
    ...storageOperations(deps),
    ...networkConfigOperations(deps),
    ...RESOURCE_KINDS.flatMap((kind) => crudOperations(deps, kind)),
    ...catalogueOperations,
  ];
}
