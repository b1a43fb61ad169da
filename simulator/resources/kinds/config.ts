import { z } from "zod";
import { errors } from "../../../src/errors.js";
import type { ResourceKind } from "../kind.js";
import { referrers } from "../references.js";
import { maskMap } from "../render.js";
import { flavorSchema } from "../schemas.js";

/** Policies, integration connections and custom domains: configuration, no deployment status. */
export const policyKind: ResourceKind = {
  kind: "policy",
  collection: "/policies",
  param: "policyName",
  ops: { list: "listPolicies", create: "createPolicy", get: "getPolicy", update: "updatePolicy", delete: "deletePolicy" },
  scope: "policies",
  spec: z.strictObject({
    type: z.enum(["location", "flavor", "maxToken"]).optional(),
    locations: z.array(z.strictObject({ name: z.string().optional(), type: z.enum(["location", "country", "continent"]).optional() })).optional(),
    flavors: z.array(flavorSchema).optional(),
    maxTokens: z
      .strictObject({
        granularity: z.string().optional(),
        input: z.number().int().optional(),
        output: z.number().int().optional(),
        ratioInputOverOutput: z.number().optional(),
        step: z.number().int().optional(),
        total: z.number().int().optional(),
      })
      .optional(),
    resourceTypes: z.array(z.enum(["model", "function", "agent", "sandbox", "application"])).optional(),
    sandbox: z.boolean().optional(),
  }),
  lifecycle: "none",
  list: "versioned",
  beforeDelete(item, ctx, deps) {
    const users = referrers(deps, ctx, "policies", item.name);
    if (users.length) throw errors.conflict(`policy "${item.name}" is used by ${users.map((u) => `${u.kind} ${u.name}`).join(", ")}`);
  },
};

export const integrationConnectionKind: ResourceKind = {
  kind: "integration-connection",
  collection: "/integrations/connections",
  param: "connectionName",
  ops: {
    list: "listIntegrationConnections",
    create: "createIntegrationConnection",
    get: "getIntegrationConnection",
    update: "updateIntegrationConnection",
    delete: "deleteIntegrationConnection",
  },
  scope: "integrations",
  spec: z.strictObject({
    integration: z.string().min(1).optional(),
    config: z.record(z.string(), z.string()).optional(),
    secret: z.record(z.string(), z.string()).optional(),
    sandbox: z.boolean().optional(),
  }),
  lifecycle: "none",
  list: "bare",
  // Every secret value is masked unless an admin asks (seed: integration connection secrets).
  mask: (doc, show) => (show || !doc.spec.secret ? doc : { ...doc, spec: { ...doc.spec, secret: maskMap(doc.spec.secret, false) } }),
  beforeDelete(item, ctx, deps) {
    const users = referrers(deps, ctx, "integrationConnections", item.name);
    if (users.length) throw errors.conflict(`integration connection "${item.name}" is used by ${users.map((u) => `${u.kind} ${u.name}`).join(", ")}`);
  },
};

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

export const customDomainKind: ResourceKind = {
  kind: "custom-domain",
  collection: "/customdomains",
  param: "domainName",
  ops: { list: "listCustomDomains", create: "createCustomDomain", get: "getCustomDomain", update: "updateCustomDomain", delete: "deleteCustomDomain" },
  scope: "customdomains",
  name: z.string().regex(DOMAIN, "a lowercase DNS name such as example.com"),
  spec: z.strictObject({
    cnameRecords: z.string().optional(),
    domainType: z.enum(["previews", "applications"]).optional(),
    fallbackPreviewId: z.string().optional(),
    region: z.string().optional(),
    subjectAlternativeNames: z.array(z.looseObject({})).optional(),
    txtRecords: z.record(z.string(), z.string()).optional(),
    // read-only, accepted on PUT and recomputed
    status: z.string().optional(),
    lastVerifiedAt: z.string().optional(),
    verificationError: z.string().optional(),
  }),
  lifecycle: "none",
  list: "bare",
  children: ["custom-domain-share"],
  prepare(doc, ctx, deps, previous) {
    const name = doc.metadata.name;
    const prev = previous?.spec ?? {};
    // The records a user must publish; verify re-checks them against the simulated DNS.
    doc.spec = {
      ...doc.spec,
      domainType: doc.spec.domainType ?? "previews",
      region: doc.spec.region ?? "us-pdx-1",
      cnameRecords: `preview.${ctx.workspace}.sim.local`,
      txtRecords: prev.txtRecords ?? { [`_sim-challenge.${name}`]: `sim-verify-${deps.ids()}` },
      status: prev.status ?? "pending",
      ...(prev.lastVerifiedAt ? { lastVerifiedAt: prev.lastVerifiedAt } : {}),
      ...(prev.verificationError ? { verificationError: prev.verificationError } : {}),
    };
    if (!prev.lastVerifiedAt) delete doc.spec.lastVerifiedAt;
    if (!prev.verificationError) delete doc.spec.verificationError;
  },
};
