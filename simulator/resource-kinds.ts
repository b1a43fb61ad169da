import type { ResourceKind } from "./resources/kind.js";
import { customDomainKind, integrationConnectionKind, policyKind } from "./resources/kinds/config.js";
import { egressGatewayKind, egressIpKind, vpcKind } from "./resources/kinds/network.js";
import { driveKind, volumeKind, volumeTemplateKind, type StorageKindDeps } from "./resources/kinds/storage.js";
import { agentKind, applicationKind, functionKind, jobKind, modelKind, type ApplicationKindDeps, type JobKindDeps } from "./resources/kinds/workloads.js";
import { previewKind, previewTokenKind, sandboxKind } from "./sandboxes/kind.js";
import type { SandboxResourceDeps } from "./sandboxes/runtime.js";

/** What the kinds' hooks need, together: each kind names its own part (resources/kind.ts's ResourceDeps, or a wider one in its module). */
export type ResourceKindsDeps = SandboxResourceDeps & StorageKindDeps & JobKindDeps & ApplicationKindDeps;

/**
 * Every table-driven resource kind, beside the composition root that serves them (the way Miniflare lists its
 * plugins): crud.ts serves each, with the dependencies it names. Add new kinds here. The kinds live in the
 * folders of what they stand for (resources/kinds/, sandboxes/kind.ts); only this table sees them all.
 */
export const RESOURCE_KINDS: readonly ResourceKind<ResourceKindsDeps>[] = [
  sandboxKind,
  previewKind,
  previewTokenKind,
  agentKind,
  functionKind,
  jobKind,
  modelKind,
  applicationKind,
  policyKind,
  integrationConnectionKind,
  customDomainKind,
  volumeKind,
  volumeTemplateKind,
  driveKind,
  vpcKind,
  egressGatewayKind,
  egressIpKind,
];
