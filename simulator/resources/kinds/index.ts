import type { ResourceKind } from "../kind.js";
import { customDomainKind, integrationConnectionKind, policyKind } from "./config.js";
import { egressGatewayKind, egressIpKind, vpcKind } from "./network.js";
import { previewKind, previewTokenKind, sandboxKind } from "../../sandboxes/kind.js";
import { driveKind, volumeKind, volumeTemplateKind } from "./storage.js";
import { agentKind, applicationKind, functionKind, jobKind, modelKind } from "./workloads.js";

/**
 * Every table-driven resource kind; crud.ts serves each. Add new kinds here. The kinds in this folder import
 * up from resources/ (kind.ts, schemas.ts, render.ts, references.ts): they are instances of the interface and
 * helpers defined there, one floor up by design (the operations table and extras.ts import the kinds from above; madge keeps that free of circles).
 */
export const RESOURCE_KINDS: readonly ResourceKind[] = [
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

export const KIND_BY_NAME = new Map(RESOURCE_KINDS.map((k) => [k.kind, k]));
