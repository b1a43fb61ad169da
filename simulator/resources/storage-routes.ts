import { errors } from "../../src/errors.js";
import { signJwt } from "../auth/jwt.js";
import type { Operation, OpContext } from "../http/operation.js";
import { loadItem, renderDoc, save, showSecrets } from "./crud.js";
import type { ResourceDeps, ResourceDoc, ResourceKind } from "./kind.js";
import { driveKind, volumeKind, volumeTemplateKind, type StorageKindDeps } from "./kinds/storage.js";

/** Volumes, drives and volume templates beyond CRUD: lookups by external id, drive access tokens, template versions. */

/** The storage kinds' dependencies and the key drive access tokens are signed with. */
export interface StorageRouteDeps extends StorageKindDeps {
  jwtSecret: Buffer;
}

function byExternalId<D extends ResourceDeps>(deps: D, kind: ResourceKind<D>, ctx: OpContext) {
  const found = deps.resources
    .list<ResourceDoc>({ workspace: ctx.workspace, kind: kind.kind, sort: "createdAt:desc" })
    .find((i) => i.doc.metadata.externalId === ctx.params.externalId);
  if (!found) throw errors.notFound(`no ${kind.kind} with externalId "${ctx.params.externalId}"`);
  return renderDoc(deps, kind, loadItem(deps, kind, ctx, found.name, "").doc, showSecrets(ctx));
}

const AccessTokenTtlS = 3600;

export function storageOperations(deps: StorageRouteDeps): Operation[] {
  return [
    {
      id: "getVolumeByExternalId",
      method: "get",
      path: "/volumes/by-external-id/:externalId",
      scope: "volumes:get",
      handler: (ctx) => byExternalId(deps, volumeKind, ctx),
    },
    {
      id: "getDriveByExternalId",
      method: "get",
      path: "/drives/by-external-id/:externalId",
      scope: "admin",
      handler: (ctx) => byExternalId(deps, driveKind, ctx),
    },
    // HS256 tokens have no public key to publish; the set names the key id and algorithm.
    {
      id: "getDriveJwks",
      method: "get",
      path: "/drives/jwks.json",
      scope: "admin",
      level: "account",
      handler: () => ({ keys: [{ kty: "oct", kid: "sandbox-sim", alg: "HS256", use: "sig" }] }),
    },
    {
      id: "createDriveAccessToken",
      method: "post",
      path: "/drives/:driveName/access-token",
      scope: "admin",
      handler: (ctx) => {
        const drive = loadItem(deps, driveKind, ctx, ctx.params.driveName!, "");
        const iat = Math.floor(deps.clock.now() / 1000);
        const token = signJwt(
          {
            iss: "sandbox-sim",
            sub: ctx.principal.sub,
            sub_type: ctx.principal.type,
            scope: `drive:${drive.name}`,
            iat,
            exp: iat + AccessTokenTtlS,
            jti: deps.ids(),
            workspace: ctx.workspace,
          },
          deps.jwtSecret,
        );
        return { access_token: token, expires_in: AccessTokenTtlS, token_type: "Bearer" };
      },
    },
    {
      id: "deleteVolumeTemplateVersion",
      method: "delete",
      path: "/volume_templates/:volumeTemplateName/versions/:versionName",
      scope: "volumeTemplates:delete",
      handler: (ctx) => {
        const item = loadItem(deps, volumeTemplateKind, ctx, ctx.params.volumeTemplateName!, "");
        const versions = (item.doc.versions ?? []) as { name?: string }[];
        if (!versions.some((v) => v.name === ctx.params.versionName)) throw errors.notFound(`version "${ctx.params.versionName}" not found`);
        item.doc.versions = versions.filter((v) => v.name !== ctx.params.versionName);
        item.doc.state = {
          ...(item.doc.state as object),
          versionCount: (item.doc.versions as unknown[]).length,
          latestVersion: (item.doc.versions as { name?: string }[]).at(-1)?.name,
        };
        save(deps, item);
        return { message: `version ${ctx.params.versionName} deleted`, template: renderDoc(deps, volumeTemplateKind, item.doc, false) };
      },
    },
  ];
}
