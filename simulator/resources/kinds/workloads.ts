import { z } from "zod";
import type { ResourceDeps, ResourceDoc, ResourceKind } from "../kind.js";
import { checkReferences, runUrl } from "../references.js";
import { maskConfigurations, maskEnvs } from "../render.js";
import { reviseApplication } from "../../applications/revisions.js";
import { runsOwnCompute, type ApplicationWorkloads } from "../../applications/workloads.js";
import { envSchema, flavorSchema, names, revisionSchema, runtimeSchema, triggerSchema, volumeAttachmentSchema } from "../schemas.js";

/** Agents, functions (MCP servers included), jobs, models, applications: deployed through UPLOADING → … → DEPLOYED. */

function maskRuntimeEnvs(doc: ResourceDoc, show: boolean): ResourceDoc {
  const runtime = doc.spec.runtime as { envs?: unknown } | undefined;
  if (show || !runtime?.envs) return doc;
  return { ...doc, spec: { ...doc.spec, runtime: { ...runtime, envs: maskEnvs(runtime.envs, false) } } };
}

const common = {
  enabled: z.boolean().optional(),
  policies: names.optional(),
  region: z.string().optional(),
  revision: revisionSchema.optional(),
  runtime: runtimeSchema.optional(),
  triggers: z.array(triggerSchema).optional(),
};

export const agentKind: ResourceKind = {
  kind: "agent",
  collection: "/agents",
  param: "agentName",
  ops: { list: "listAgents", create: "createAgent", get: "getAgent", update: "updateAgent", delete: "deleteAgent" },
  scope: "agents",
  spec: z.strictObject({
    ...common,
    public: z.boolean().optional(),
    repository: z.looseObject({ type: z.string().optional(), url: z.string().optional() }).optional(),
    volumes: z.array(volumeAttachmentSchema).optional(),
  }),
  lifecycle: "deployment",
  list: "versioned",
  statusFilter: true,
  prepare(doc, ctx, deps) {
    checkReferences(deps, doc, ctx);
    doc.metadata.url = runUrl(deps, ctx, "agents", doc.metadata.name);
  },
  mask: maskRuntimeEnvs,
};

/**
 * Functions accept the current FunctionSpec and the seed's older fields
 * (configurations, flavors, sandbox, description, type "mcp" for MCP servers).
 */
export const functionKind: ResourceKind = {
  kind: "function",
  collection: "/functions",
  param: "functionName",
  ops: { list: "listFunctions", create: "createFunction", get: "getFunction", update: "updateFunction", delete: "deleteFunction" },
  scope: "functions",
  spec: z.strictObject({
    ...common,
    integrationConnections: names.optional(),
    public: z.boolean().optional(),
    configurations: z.record(z.string(), z.strictObject({ secret: z.boolean().optional(), value: z.string().optional() })).optional(),
    flavors: z.array(flavorSchema).optional(),
    sandbox: z.boolean().optional(),
    description: z.string().optional(),
    type: z.string().optional(),
  }),
  lifecycle: "deployment",
  list: "versioned",
  statusFilter: true,
  prepare(doc, ctx, deps) {
    checkReferences(deps, doc, ctx);
    // An MCP server may be declared by spec.type or runtime.type; both read back as "mcp".
    const runtime = (doc.spec.runtime ?? {}) as Record<string, unknown>;
    if (doc.spec.type === "mcp" || runtime.type === "mcp") {
      doc.spec.type = "mcp";
      doc.spec.runtime = { ...runtime, type: "mcp" };
    }
    doc.metadata.url = runUrl(deps, ctx, "functions", doc.metadata.name);
  },
  mask(doc, show) {
    const masked = maskRuntimeEnvs(doc, show);
    return show || !masked.spec.configurations
      ? masked
      : { ...masked, spec: { ...masked.spec, configurations: maskConfigurations(masked.spec.configurations, false) } };
  },
};

/** What the job kind's hooks need besides the records: the executor whose running executions stop with their job. */
export interface JobKindDeps extends ResourceDeps {
  jobs: { cancelJob(workspace: string, job: string): void };
}

export const jobKind: ResourceKind<JobKindDeps> = {
  kind: "job",
  collection: "/jobs",
  param: "jobId",
  ops: { list: "listJobs", create: "createJob", get: "getJob", update: "updateJob", delete: "deleteJob" },
  scope: "jobs",
  spec: z.strictObject({
    ...common,
    githubRunner: z.looseObject({ repositories: names.optional() }).optional(),
    volumes: z.array(volumeAttachmentSchema).optional(),
    configurations: z.record(z.string(), z.strictObject({ secret: z.boolean().optional(), value: z.string().optional() })).optional(),
    flavors: z.array(flavorSchema).optional(),
    integrationConnections: names.optional(),
    sandbox: z.boolean().optional(),
  }),
  lifecycle: "deployment",
  list: "versioned",
  statusFilter: true,
  children: ["job-execution"],
  prepare(doc, ctx, deps) {
    checkReferences(deps, doc, ctx);
    doc.metadata.url = runUrl(deps, ctx, "jobs", doc.metadata.name);
  },
  // Executions running for real (simulator/jobs/runner.ts) stop with their job.
  beforeDelete(item, ctx, deps) {
    deps.jobs.cancelJob(ctx.workspace, item.name);
  },
  mask: (doc, show) => {
    const masked = maskRuntimeEnvs(doc, show);
    return show || !masked.spec.configurations
      ? masked
      : { ...masked, spec: { ...masked.spec, configurations: maskConfigurations(masked.spec.configurations, false) } };
  },
};

export const modelKind: ResourceKind = {
  kind: "model",
  collection: "/models",
  param: "modelName",
  ops: { list: "listModels", create: "createModel", get: "getModel", update: "updateModel", delete: "deleteModel" },
  scope: "models",
  spec: z.strictObject({ ...common, flavors: z.array(flavorSchema).optional(), integrationConnections: names.optional(), sandbox: z.boolean().optional() }),
  lifecycle: "deployment",
  list: "versioned",
  statusFilter: true,
  prepare(doc, ctx, deps) {
    checkReferences(deps, doc, ctx);
    doc.metadata.url = runUrl(deps, ctx, "models", doc.metadata.name);
  },
  mask: maskRuntimeEnvs,
};

/** What the application kind's hooks need besides the records: what runs applications (or nothing, records only). */
export interface ApplicationKindDeps extends ResourceDeps {
  applications: ApplicationWorkloads;
}

const activeRevision = (doc: ResourceDoc | undefined) => (doc?.spec.revision as { active?: string } | undefined)?.active;
export const applicationKind: ResourceKind<ApplicationKindDeps> = {
  kind: "application",
  collection: "/applications",
  param: "applicationName",
  ops: { list: "listApplications", create: "createApplication", get: "getApplication", update: "updateApplication", delete: "deleteApplication" },
  scope: "applications",
  spec: z.strictObject({
    enabled: z.boolean().optional(),
    envs: z.array(envSchema).optional(),
    extensions: z.record(z.string(), z.looseObject({ sandbox: z.string().optional() })).optional(),
    image: z.string().optional(),
    memory: z.number().int().min(0).optional(),
    port: z.number().int().min(1).max(65535).optional(),
    proxy: z.boolean().optional(),
    region: z.string().optional(),
    revision: z.looseObject({}).optional(),
    revisions: z.array(z.looseObject({})).optional(),
    urls: z.looseObject({}).optional(),
  }),
  lifecycle: "deployment",
  list: "versioned",
  statusFilter: true,
  children: ["customdomain-link"],
  prepare(doc, ctx, deps, previous) {
    reviseApplication(doc, ctx, deps, previous);
    doc.metadata.url = runUrl(deps, ctx, "applications", doc.metadata.name);
  },
  // With a runtime, the workload moves the status: DEPLOYING until it answers on its port (applications/runner.ts).
  // An update that changed no compute leaves a running revision as it is.
  deployPlan(doc, deps, previous) {
    if (!deps.applications.runs || doc.spec.enabled === false) return undefined;
    if (!runsOwnCompute(doc)) return ["DEPLOYED"];
    const running = previous?.status === "DEPLOYED" && deps.applications.runsRevision(doc.metadata.workspace as string, doc.metadata.name, activeRevision(doc));
    return running ? ["DEPLOYED"] : ["DEPLOYING"];
  },
  afterWrite(doc, ctx, deps, previous) {
    if (!deps.applications.runs) return;
    if (!runsOwnCompute(doc)) return void deps.applications.stop(ctx.workspace, doc.metadata.name);
    if (doc.status === "DEPLOYING" || activeRevision(doc) !== activeRevision(previous)) deps.applications.deploy(ctx.workspace, doc.metadata.name);
  },
  beforeDelete(item, ctx, deps) {
    void deps.applications.stop(ctx.workspace, item.name);
  },
  mask: (doc, show) => {
    if (show) return doc;
    const revisions = (doc.spec.revisions as { envs?: unknown }[] | undefined)?.map((r) => (r.envs ? { ...r, envs: maskEnvs(r.envs, false) } : r));
    return { ...doc, spec: { ...doc.spec, ...(doc.spec.envs ? { envs: maskEnvs(doc.spec.envs, false) } : {}), ...(revisions ? { revisions } : {}) } };
  },
};
