import { z } from "zod";
import { randomBytes } from "node:crypto";
import { errors } from "../../src/errors.js";
import type { OpContext } from "../http/operation.js";
import { previewUrl } from "../previews/urls.js";
import type { ResourceDoc, ResourceKind } from "../resources/kind.js";
import { maskEnvs, maskMap } from "../resources/render.js";
import { runtimeSchema, volumeAttachmentSchema } from "../resources/schemas.js";
import { sandboxExpiry, type ExpiringDoc } from "./expiry-rules.js";
import { expireDueSandboxes, SANDBOX_CHILDREN } from "./expiry.js";
import { NetworkSpecError, parseNetwork } from "../egress/policy.js";
import type { SandboxResourceDeps } from "./runtime.js";

/**
 * Sandboxes: created DEPLOYED synchronously, as the SDK expects (control-plane.md §1.6). With real agents
 * the record is DEPLOYING until the agent is healthy, and create answers then (simulator/sandboxes/agent-lifecycle.ts).
 */
export const sandboxKind: ResourceKind<SandboxResourceDeps> = {
  kind: "sandbox",
  collection: "/sandboxes",
  param: "sandboxName",
  // updateSandbox is simulator/sandboxes/routes.ts: the generic update, then what the new spec means for the agent.
  ops: { list: "listSandboxes", get: "getSandbox", delete: "deleteSandbox" },
  scope: "sandboxes",
  spec: z.strictObject({
    enabled: z.boolean().optional(),
    region: z.string().optional(),
    // The SDK's updateTtl("") and updateLifecycle(undefined) send null to clear them.
    runtime: runtimeSchema.extend({ ttl: z.string().nullable().optional(), expires: z.string().nullable().optional() }).optional(),
    volumes: z.array(volumeAttachmentSchema).optional(),
    lifecycle: z.looseObject({}).nullable().optional(),
    network: z.looseObject({}).optional(),
    vpc: z.string().optional(),
  }),
  lifecycle: "synchronous",
  list: "versioned",
  statusFilter: true,
  hiddenStatuses: { statuses: ["TERMINATED"], shownBy: "showTerminated" },
  generateName: () => `sandbox-${randomBytes(4).toString("hex")}`,
  children: SANDBOX_CHILDREN,
  conflictDetails: { code: "SANDBOX_ALREADY_EXISTS" },
  prepare(doc, ctx, deps, previous) {
    if (previous) keepRoutingSecrets(doc.spec.network, previous.spec.network);
    checkNetwork(doc.spec.network);
    const runtime = (doc.spec.runtime ?? {}) as Record<string, unknown>;
    doc.spec.runtime = { image: "blaxel/base-image:latest", memory: 4096, ...runtime };
    // A null clears the field (the SDK's way): it is not kept as null.
    for (const field of ["ttl", "expires"])
      if ((doc.spec.runtime as Record<string, unknown>)[field] === null) delete (doc.spec.runtime as Record<string, unknown>)[field];
    if (doc.spec.lifecycle === null) delete doc.spec.lifecycle;
    doc.spec.region ??= "us-pdx-1";
    // Where the SDK sends sandbox-local calls (filesystem, processes): the run-URL pattern.
    doc.metadata.url = deps.sandboxes.runUrl(deps.urls.base, ctx.workspace, doc.metadata.name);
    doc.state = "RUNNING";
    // With real agents: volumes checked, labels kept for drive permissions (agent-runtime.ts).
    deps.sandboxes.preparing(ctx, doc);
  },
  mask(doc, show) {
    const runtime = doc.spec.runtime as { envs?: unknown } | undefined;
    const network = maskRoutingSecrets(doc.spec.network);
    if ((!runtime?.envs || show) && network === doc.spec.network) return doc;
    return { ...doc, spec: { ...doc.spec, network, runtime: runtime?.envs && !show ? { ...runtime, envs: maskEnvs(runtime.envs, false) } : runtime } };
  },
  // "Time in seconds until the sandbox is automatically deleted based on TTL and lifecycle policies. Only present
  // for sandboxes with lifecycle configured" (the SDK's Sandbox.expiresIn).
  readFields(doc, ctx, deps) {
    if (doc.status === "TERMINATED" || doc.status === "DELETING") return undefined;
    const expiry = sandboxExpiry(deps, ctx.workspace, doc.metadata.name, doc as ExpiringDoc);
    const live: Record<string, unknown> = expiry ? { expiresIn: Math.max(0, Math.floor((expiry.dueMs - deps.clock.now()) / 1000)) } : {};
    // Sandbox.state: STANDBY while its processes are stopped in place (simulator/standby); the status stays DEPLOYED.
    if (deps.sandboxes.standbyState(ctx.workspace, doc.metadata.name) === "STANDBY") live.state = "STANDBY";
    // lastUsedAt to the request (the stored one is written at most once a minute); 0: no request went through yet.
    const used = deps.sandboxes.lastUsedMs(ctx.workspace, doc.metadata.name);
    const stored = typeof doc.lastUsedAt === "string" ? Date.parse(doc.lastUsedAt) : NaN;
    if (used > 0 && !(stored >= used)) live.lastUsedAt = new Date(used).toISOString();
    return Object.keys(live).length > 0 ? live : undefined;
  },
  // Expiry is due on the clock, not on the sweeper's schedule: a read after the ttl sees TERMINATED.
  beforeRead(ctx, deps, name) {
    expireDueSandboxes(deps, { workspace: ctx.workspace, sandbox: name });
  },
  // Lists carry the lite form: no events (control-plane.md §3.2).
  listItem: ({ events: _events, ...rest }) => rest,
  // Delete stops the agent (SIGTERM, then SIGKILL) and removes its files.
  beforeDelete(item, ctx, deps) {
    deps.sandboxes.remove(ctx.workspace, item.name, (err) => deps.logger.warn({ sandbox: item.name, err: err.message }, "sandbox agent cleanup failed"));
  },
};

/** spec.network is what the sandbox's egress proxy applies (simulator/egress/policy.ts): a 400 naming the field, nothing stored, when it cannot be. */
function checkNetwork(network: unknown): void {
  try {
    parseNetwork(network);
  } catch (err) {
    throw err instanceof NetworkSpecError ? errors.badRequest(err.message) : err;
  }
}

export const previewKind: ResourceKind = {
  kind: "preview",
  collection: "/sandboxes/:sandboxName/previews",
  param: "previewName",
  parent: { params: ["sandboxName"], kind: "sandbox", label: "sandbox" },
  ops: { list: "listSandboxPreviews", get: "getSandboxPreview", update: "updateSandboxPreview", delete: "deleteSandboxPreview" },
  scope: "sandboxes",
  spec: z.strictObject({
    port: z.number().int().min(1).max(65535).optional(),
    public: z.boolean().optional(),
    url: z.string().optional(),
    prefixUrl: z.string().optional(),
    customDomain: z.string().optional(),
    region: z.string().optional(),
    expires: z.string().optional(),
    ttl: z.string().optional(),
    requestHeaders: z.record(z.string(), z.string()).optional(),
    responseHeaders: z.record(z.string(), z.string()).optional(),
  }),
  lifecycle: "synchronous",
  list: "bare",
  children: ["preview-token"],
  prepare(doc, ctx, deps) {
    doc.metadata.resourceName = ctx.params.sandboxName;
    doc.metadata.resourceType = "sandbox";
    doc.spec.port ??= 80;
    doc.spec.public ??= false;
    checkPrefixUrl(deps, ctx, doc);
    // Served by the sandbox proxy (simulator/previews): both forms answer, the config picks the one written here.
    doc.spec.url = previewUrl(
      deps.urls.base,
      deps.config.previewUrls,
      ctx.workspace,
      ctx.params.sandboxName!,
      doc.metadata.name,
      doc.spec.prefixUrl as string | undefined,
    );
  },
};

/** prefixUrl names the preview's host (`{prefixUrl}-{workspace}.preview...`): a DNS label, one preview per workspace. */
function checkPrefixUrl(deps: Pick<SandboxResourceDeps, "resources">, ctx: OpContext, doc: ResourceDoc): void {
  const prefix = doc.spec.prefixUrl;
  if (prefix === undefined || prefix === "") return void delete doc.spec.prefixUrl;
  if (typeof prefix !== "string" || !/^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/.test(prefix))
    throw errors.badRequest("spec.prefixUrl: lowercase letters, digits and '-', at most 32 characters");
  const taken = deps.resources
    .allOfKind(ctx.workspace, ["preview"])
    .find((p) => (p.doc as ResourceDoc).spec.prefixUrl === prefix && !(p.parent === ctx.params.sandboxName && p.name === doc.metadata.name));
  if (taken) throw errors.conflict(`spec.prefixUrl "${prefix}" is already used by preview "${taken.name}" of sandbox "${taken.parent}"`);
}

export const previewTokenKind: ResourceKind = {
  kind: "preview-token",
  collection: "/sandboxes/:sandboxName/previews/:previewName/tokens",
  param: "tokenName",
  parent: { params: ["sandboxName", "previewName"], kind: "preview", label: "preview" },
  // deleteSandboxPreviewToken is simulator/sandboxes/routes.ts: by the token's id or by its value.
  ops: { list: "listSandboxPreviewTokens" },
  scope: "sandboxes",
  spec: z.strictObject({ expiresAt: z.string().optional(), token: z.string().optional(), expired: z.boolean().optional() }),
  lifecycle: "none",
  list: "bare",
  generateName: () => `token-${randomBytes(4).toString("hex")}`,
  // `expired` follows the simulator clock.
  readFields: (doc, _ctx, deps) => ({ spec: { ...doc.spec, expired: !(Date.parse(String(doc.spec.expiresAt)) > deps.clock.now()) } }),
};

type RoutingRuleDoc = { destinations?: unknown; secrets?: unknown };
const routingOf = (network: unknown): RoutingRuleDoc[] | undefined => {
  const routing = (network as { proxy?: { routing?: unknown } } | undefined)?.proxy?.routing;
  return Array.isArray(routing) ? (routing as RoutingRuleDoc[]) : undefined;
};

/**
 * `spec.network.proxy.routing[].secrets` are write-only ("never returned in API responses", the SDK's types):
 * the platform leaves them out of every answer but the create's (which echoes what was sent: sandboxCreateAnswer),
 * even for an admin (a secret read back is a secret leaked).
 */
function maskRoutingSecrets(network: unknown): unknown {
  const routing = routingOf(network);
  if (!routing?.some((r) => r && typeof r === "object" && "secrets" in r)) return network;
  const proxy = (network as { proxy: object }).proxy;
  return { ...(network as object), proxy: { ...proxy, routing: routing.map((r) => (r && typeof r === "object" ? { ...r, secrets: undefined } : r)) } };
}

/**
 * A read-modify-write sends back rules without their secrets (a GET has none): a rule sent without `secrets`
 * keeps those of the stored rule at the same place with the same destinations. ("***" sent back keeps the stored
 * value too: crud.ts.)
 */
function keepRoutingSecrets(next: unknown, previous: unknown): void {
  const rules = routingOf(next);
  const stored = routingOf(previous);
  if (!rules || !stored) return;
  rules.forEach((rule, i) => {
    const old = stored[i];
    if (!rule || typeof rule !== "object" || rule.secrets !== undefined || !old?.secrets) return;
    if (JSON.stringify(rule.destinations) === JSON.stringify(old.destinations)) rule.secrets = old.secrets;
  });
}

/** The create's answer: the routing secrets as they were sent (the platform's create echoes them; nothing else does). */
export function sandboxCreateAnswer<T>(answer: T, sent: unknown): T {
  const sentRules = routingOf((sent as { spec?: { network?: unknown } } | undefined)?.spec?.network);
  const rules = routingOf((answer as { spec?: { network?: unknown } } | undefined)?.spec?.network);
  if (!sentRules || !rules || !sentRules.some((r) => r && typeof r === "object" && r.secrets !== undefined)) return answer;
  const routing = rules.map((r, i) => (sentRules[i]?.secrets !== undefined && r && typeof r === "object" ? { ...r, secrets: sentRules[i]!.secrets } : r));
  const spec = (answer as { spec: { network: { proxy: object } } }).spec;
  return { ...answer, spec: { ...spec, network: { ...spec.network, proxy: { ...spec.network.proxy, routing } } } };
}
