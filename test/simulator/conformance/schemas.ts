import { z } from "zod";

/**
 * Response contracts of @blaxel/core 0.3.21's control-plane types
 * (dist/cjs/types/client/types.gen.d.ts), as zod schemas: required fields
 * required, every present field typed, extra fields allowed (the SDK does
 * not validate responses, so extra fields are harmless).
 */
const str = z.string();
const num = z.number();
const bool = z.boolean();
const opt = <T extends z.ZodType>(t: T) => t.optional();
const obj = <S extends z.ZodRawShape>(shape: S) => z.looseObject(shape);

const Status = z.enum([
  "DELETING",
  "TERMINATED",
  "FAILED",
  "DEACTIVATED",
  "DEACTIVATING",
  "UPLOADING",
  "BUILDING",
  "DEPLOYING",
  "DEPLOYED",
  "BUILT",
  "ARCHIVING",
  "ARCHIVED",
  "UNARCHIVING",
]);
const Times = { createdAt: opt(str), updatedAt: opt(str), createdBy: opt(str), updatedBy: opt(str) };
const CoreEvent = obj({ canaryRevision: opt(str), message: opt(str), revision: opt(str), status: opt(str), time: opt(str), type: opt(str) });
export const Metadata = obj({
  ...Times,
  name: str,
  displayName: opt(str),
  externalId: opt(str),
  labels: opt(z.record(str, str)),
  plan: opt(z.unknown()),
  url: opt(str),
  workspace: opt(str),
});
const Env = obj({ name: opt(str), value: opt(str), secret: opt(bool) });
const Port = obj({ name: opt(str), target: num, protocol: opt(z.enum(["HTTP", "TCP", "UDP", "TLS"])) });
const Runtime = obj({
  envs: opt(z.array(Env)),
  ports: opt(z.array(Port)),
  image: opt(str),
  memory: opt(num),
  generation: opt(str),
  minScale: opt(num),
  maxScale: opt(num),
  timeout: opt(num),
  maxRetries: opt(num),
  ttl: opt(str),
  expires: opt(str),
});
export const Meta = obj({ hasMore: opt(bool), nextCursor: opt(str), total: opt(num) });
export const paged = <T extends z.ZodType>(item: T) => obj({ data: opt(z.array(item)), meta: opt(Meta) });

const deployed = (spec: z.ZodType) => obj({ metadata: Metadata, spec, status: opt(Status), events: opt(z.array(CoreEvent)) });
const CommonSpec = {
  enabled: opt(bool),
  policies: opt(z.array(str)),
  region: opt(str),
  runtime: opt(Runtime),
  triggers: opt(z.array(obj({ id: opt(str), type: opt(str), enabled: opt(bool) }))),
};

export const Agent = deployed(obj({ ...CommonSpec, public: opt(bool) }));
export const Fn = deployed(obj({ ...CommonSpec, integrationConnections: opt(z.array(str)) }));
export const Job = deployed(obj(CommonSpec));
export const Model = deployed(
  obj({ ...CommonSpec, integrationConnections: opt(z.array(str)), flavors: opt(z.array(obj({ name: opt(str), type: opt(str) }))) }),
);
export const Application = obj({
  metadata: Metadata,
  spec: obj({ enabled: opt(bool), envs: opt(z.array(Env)), image: opt(str), memory: opt(num), port: opt(num), region: opt(str) }),
  status: opt(str),
  events: opt(z.array(CoreEvent)),
});
export const Sandbox = obj({
  metadata: Metadata,
  spec: obj({ enabled: opt(bool), region: opt(str), runtime: opt(Runtime), volumes: opt(z.array(obj({}))), vpc: opt(str) }),
  status: opt(Status),
  state: opt(z.enum(["RUNNING", "STANDBY"])),
  events: opt(z.array(CoreEvent)),
});
export const Policy = obj({
  metadata: Metadata,
  spec: obj({ type: opt(z.enum(["location", "flavor", "maxToken"])), locations: opt(z.array(obj({}))), resourceTypes: opt(z.array(str)) }),
});
export const PolicyUsages = obj({
  agents: opt(z.array(obj({}))),
  functions: opt(z.array(obj({}))),
  jobs: opt(z.array(obj({}))),
  models: opt(z.array(obj({}))),
  sandboxes: opt(z.array(obj({}))),
});
export const Volume = obj({
  metadata: Metadata,
  spec: obj({ size: opt(num), region: opt(str), template: opt(str) }),
  state: opt(obj({ attachedTo: opt(str) })),
  status: opt(str),
  events: opt(z.array(CoreEvent)),
});
export const LiteVolume = obj({
  metadata: opt(obj({ name: opt(str), displayName: opt(str), externalId: opt(str) })),
  spec: opt(obj({ region: opt(str), size: opt(num) })),
  status: opt(str),
});
export const VolumeTemplate = obj({
  metadata: Metadata,
  spec: obj({ defaultSize: opt(num), description: opt(str) }),
  state: opt(obj({ status: opt(z.enum(["created", "ready", "error"])), latestVersion: opt(str), versionCount: opt(num) })),
  versions: opt(z.array(obj({ name: opt(str), status: opt(z.enum(["CREATED", "READY", "FAILED"])) }))),
});
export const Drive = obj({
  metadata: Metadata,
  spec: obj({ region: opt(str), permissions: opt(z.array(obj({}))) }),
  state: opt(obj({ s3Url: opt(str) })),
  status: opt(str),
  events: opt(z.array(CoreEvent)),
});
export const CustomDomain = obj({
  metadata: obj({ ...Times, name: opt(str), displayName: opt(str), workspace: opt(str) }),
  spec: obj({
    cnameRecords: opt(str),
    domainType: opt(z.enum(["previews", "applications"])),
    lastVerifiedAt: opt(str),
    region: opt(str),
    status: opt(z.enum(["pending", "verified", "failed"])),
    txtRecords: opt(z.record(str, str)),
    verificationError: opt(str),
  }),
});
export const CustomDomainShareTarget = obj({ status: str, workspace: str, workspaceDisplayName: opt(str) });
export const IntegrationConnection = obj({
  metadata: Metadata,
  spec: obj({ integration: opt(str), config: opt(z.record(str, str)), secret: opt(z.record(str, str)), sandbox: opt(bool) }),
});
export const Integration = obj({ name: opt(str), additionalInfos: opt(z.record(str, str)) });
export const Vpc = obj({ metadata: Metadata, spec: obj({}), status: opt(Status), events: opt(z.array(CoreEvent)) });
export const EgressGateway = obj({
  metadata: obj({ ...Times, name: str, displayName: opt(str), vpcName: opt(str), workspace: opt(str) }),
  spec: obj({ region: str }),
  status: opt(Status),
  events: opt(z.array(CoreEvent)),
});
export const EgressIp = obj({
  metadata: obj({ ...Times, name: str, gatewayName: opt(str), vpcName: opt(str) }),
  spec: obj({ ipFamily: z.enum(["IPv4", "IPv6"]), publicIp: opt(str) }),
  status: opt(Status),
});
export const EgressGatewayUsage = z.record(str, z.array(str));
export const Preview = obj({
  metadata: obj({ ...Times, name: str, resourceName: opt(str), resourceType: opt(str), workspace: opt(str) }),
  spec: obj({ port: opt(num), public: opt(bool), url: opt(str) }),
  status: opt(Status),
});
export const PreviewToken = obj({
  metadata: obj({ name: str, previewName: opt(str), resourceName: opt(str) }),
  spec: obj({ token: opt(str), expiresAt: opt(str), expired: opt(bool) }),
});
export const ScheduleEntry = obj({
  id: opt(str),
  type: opt(z.enum(["cron", "at", "sleep"])),
  value: opt(str),
  input: opt(obj({ command: opt(str), env: opt(z.record(str, str)), keepAlive: opt(bool), name: opt(str), timeout: opt(num), workingDir: opt(str) })),
  maxExecutions: opt(num),
  sandbox: opt(str),
  createdAt: opt(str),
});
export const ScheduleExecution = obj({
  id: opt(str),
  scheduleId: opt(str),
  sandbox: opt(str),
  createdAt: opt(str),
  executedAt: opt(str),
  status: opt(z.enum(["succeeded", "failed"])),
  statusCode: opt(num),
  error: opt(str),
  processName: opt(str),
  timeout: opt(num),
});
export const ScheduleMetrics = obj({
  since: opt(str),
  until: opt(str),
  sandboxes: opt(num),
  schedules: opt(num),
  executions: opt(num),
  executionsByStatus: opt(obj({ succeeded: opt(num), failed: opt(num) })),
});
export const Snapshot = obj({
  id: str,
  name: str,
  status: z.enum(["pending", "ready", "failed"]),
  workspace: str,
  createdAt: str,
  createdBy: opt(str),
  sandboxName: opt(str),
  source: opt(obj({ name: str, kind: opt(z.literal("sandbox")) })),
});
export const ForkResponse = obj({ name: opt(str), snapshotId: opt(str), type: opt(z.enum(["sandbox", "application"])) });
export const RestoreResponse = obj({ name: str, snapshotId: str });
/** An application's revision (AppRevision): generated from the spec-level compute. */
export const AppRevision = obj({
  id: opt(str),
  image: str,
  memory: opt(num),
  port: opt(num),
  envs: opt(z.array(z.unknown())),
  createdAt: opt(str),
  createdBy: opt(str),
});
export const Revision = obj({
  id: opt(str),
  active: opt(bool),
  canary: opt(bool),
  status: opt(str),
  trafficPercent: opt(num),
  createdAt: opt(str),
  createdBy: opt(str),
});
const Task = obj({
  conditions: opt(z.array(obj({}))),
  metadata: opt(obj({ name: opt(str), createdAt: opt(str), startedAt: opt(str), completedAt: opt(str) })),
  spec: opt(obj({ maxRetries: opt(num), timeout: opt(str) })),
  status: opt(z.enum(["unspecified", "pending", "reconciling", "failed", "succeeded", "running", "cancelled"])),
});
export const JobExecution = obj({
  metadata: obj({ id: opt(str), job: opt(str), workspace: opt(str), createdAt: opt(str), startedAt: opt(str), completedAt: opt(str) }),
  spec: obj({ envOverride: opt(z.record(str, str)), parallelism: opt(num), tasks: opt(z.array(obj({}))), timeout: opt(num) }),
  stats: opt(obj({ cancelled: num, failure: num, retried: num, running: num, success: num, total: num })),
  status: opt(z.enum(["queued", "pending", "running", "cancelling", "cancelled", "failed", "succeeded", "timeout"])),
  tasks: opt(z.array(Task)),
});
export const TaskList = paged(Task);
export const CreateExecutionOutput = obj({ executionId: opt(str), id: opt(str), jobId: opt(str), workspaceId: opt(str), tasks: opt(z.array(obj({}))) });
export const Image = obj({
  metadata: obj({ name: opt(str), resourceType: opt(str), workspace: opt(str), sourceWorkspace: opt(str), status: opt(str), createdAt: opt(str) }),
  spec: obj({ size: opt(num), tags: opt(z.array(obj({ name: opt(str), size: opt(num) }))) }),
});
export const ImageShareTarget = obj({ workspace: str, accountId: str, status: z.enum(["active", "pending"]), pendingShareId: opt(str) });
export const PendingImageShare = obj({
  id: opt(str),
  imageName: opt(str),
  resourceType: opt(str),
  sourceWorkspace: opt(str),
  sourceAccountId: opt(str),
  targetWorkspace: opt(str),
  targetAccountId: opt(str),
  sharedBy: opt(str),
  expiresAt: opt(str),
});
export const PendingImageShareRender = PendingImageShare.extend({ hasConflict: opt(bool), sharedByEmail: opt(str) });
export const CreateImageOutput = obj({ image: opt(str), message: opt(str), name: opt(str), resourceType: opt(str) });
export const ServiceAccount = obj({ client_id: opt(str), name: opt(str), description: opt(str), created_at: opt(str), updated_at: opt(str) });
export const ServiceAccountCreated = ServiceAccount.extend({ client_secret: str });
export const ApiKey = obj({ ...Times, id: opt(str), name: opt(str), apiKey: opt(str), expires_in: opt(str), sub: opt(str), sub_type: opt(str) });
export const WorkspaceUser = obj({
  sub: opt(str),
  email: opt(str),
  email_verified: opt(bool),
  role: opt(str),
  accepted: opt(bool),
  expired: opt(bool),
  source: opt(z.enum(["directory_sync", "invitation", "domain_capture"])),
});
export const PendingInvitation = obj({ ...Times, email: opt(str), role: opt(str), workspace: opt(str), invitedBy: opt(str) });
export const Workspace = obj({
  ...Times,
  name: opt(str),
  displayName: opt(str),
  id: opt(str),
  accountId: opt(str),
  region: opt(str),
  labels: opt(z.record(str, str)),
  status: opt(z.enum(["created", "account_binded", "account_configured", "workspace_configured", "ready", "error"])),
  resourceCounts: opt(z.record(str, num)),
});
// The seed says message and reason are "" when the name is available; the SDK's enum type omits "".
export const Availability = z.union([
  bool,
  obj({ available: opt(bool), message: opt(str), reason: opt(z.enum(["", "taken", "forbidden_reserved", "forbidden_blaxel", "forbidden_v_prefix"])) }),
]);
export const Features = obj({ features: opt(z.record(str, bool)) });
export const FeatureFlag = obj({ enabled: opt(bool), evaluatedAt: opt(str), featureKey: opt(str), variant: opt(str) });
export const Location = obj({ continent: opt(str), country: opt(str), location: opt(str), region: opt(str), status: opt(str), flavors: opt(z.array(obj({}))) });
export const Configuration = obj({
  continents: opt(z.array(obj({}))),
  countries: opt(z.array(obj({}))),
  regions: opt(z.array(obj({}))),
  detectedRegion: opt(str),
});
export const McpDefinition = obj({ name: opt(str), displayName: opt(str), description: opt(str), integration: opt(str), transport: opt(str) });
export const SandboxDefinition = obj({ name: opt(str), image: opt(str), memory: opt(num) });
export const Template = obj({ name: opt(str), description: opt(str), topics: opt(z.array(str)) });
export const Changelog = obj({ entries: opt(z.array(obj({ title: opt(str), date: opt(str), content: opt(str) }))) });
export const PublicIps = z.record(str, obj({ description: opt(str), ipv4Cidrs: opt(z.array(str)), ipv6Cidrs: opt(z.array(str)) }));
export const Jwks = obj({ keys: opt(z.array(obj({}))) });
export const AccessToken = obj({ access_token: opt(str), expires_in: opt(num), token_type: opt(str) });
export const Message = obj({ message: opt(str) });
export const Deleted = obj({ message: opt(str), name: opt(str) });
export const CleanupOutput = obj({ deleted: opt(num), message: opt(str) });
export const VolumeTemplateVersionDeleted = obj({ message: opt(str), template: opt(VolumeTemplate) });
export const Anything = z.unknown();
export const Empty = z.union([z.object({}), z.undefined(), z.literal("")]);
export const list = <T extends z.ZodType>(t: T) => z.array(t);
