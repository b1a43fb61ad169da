/**
 * The resource kinds the console lists, with their collection path under /v0
 * (the SDK's list operations) and an example body for "Create from JSON".
 */
export interface Kind {
  id: string;
  label: string;
  /** Collection path under /v0. */
  path: string;
  /** Sorts the list accepts (default: createdAt and name). */
  sortFields?: ("createdAt" | "name")[];
  /** A body for POST {path}; absent = not created from the console. */
  example?: unknown;
  /** Items have no page of their own. */
  noDetail?: boolean;
}

const deployment = (image: string) => ({ metadata: { name: "" }, spec: { runtime: { image, memory: 2048 } } });

export const KINDS: Kind[] = [
  { id: "sandboxes", label: "Sandboxes", path: "/sandboxes" },
  { id: "agents", label: "Agents", path: "/agents", example: deployment("blaxel/agent:latest") },
  { id: "functions", label: "Functions", path: "/functions", example: deployment("blaxel/mcp:latest") },
  { id: "jobs", label: "Jobs", path: "/jobs", example: { metadata: { name: "" }, spec: { runtime: { image: "blaxel/job:latest", memory: 2048 } } } },
  { id: "models", label: "Models", path: "/models", example: { metadata: { name: "" }, spec: { runtime: { type: "openai", model: "gpt-4o-mini" } } } },
  { id: "applications", label: "Applications", path: "/applications", example: deployment("blaxel/app:latest") },
  { id: "volumes", label: "Volumes", path: "/volumes", example: { metadata: { name: "" }, spec: { size: 1024 } } },
  { id: "drives", label: "Drives", path: "/drives", example: { metadata: { name: "" }, spec: {} } },
  { id: "volume_templates", label: "Volume templates", path: "/volume_templates", example: { metadata: { name: "" }, spec: {} } },
  { id: "snapshots", label: "Snapshots", path: "/snapshots" },
  { id: "schedules", label: "Schedules", path: "/schedules", sortFields: ["createdAt"], noDetail: true },
  {
    id: "policies",
    label: "Policies",
    path: "/policies",
    example: { metadata: { name: "" }, spec: { type: "location", locations: [{ type: "country", name: "us" }] } },
  },
  {
    id: "integrations",
    label: "Integrations",
    path: "/integrations/connections",
    example: { metadata: { name: "" }, spec: { integration: "openai", config: {}, secret: { apiKey: "" } } },
  },
  { id: "customdomains", label: "Custom domains", path: "/customdomains", example: { metadata: { name: "" }, spec: {} } },
  { id: "vpcs", label: "VPCs", path: "/vpcs", example: { metadata: { name: "" }, spec: {} } },
  // A bare array: the API neither pages nor sorts images.
  { id: "images", label: "Images", path: "/images", noDetail: true, sortFields: [] },
];

export const kindById = (id: string) => KINDS.find((k) => k.id === id);

/** Whatever a list item calls its name. */
export function nameOf(item: unknown): string {
  const i = item as { metadata?: { name?: string }; name?: string; id?: string; client_id?: string };
  return i.metadata?.name ?? i.name ?? i.id ?? i.client_id ?? "";
}

export interface ResourceLike {
  metadata?: { name?: string; displayName?: string; createdAt?: string; updatedAt?: string; url?: string; resourceName?: string };
  spec?: Record<string, unknown>;
  status?: string;
  events?: { type?: string; status?: string; message?: string; time?: string }[];
  expiresIn?: number;
  /** Sandboxes: RUNNING, or STANDBY while their processes are stopped in place. */
  state?: string;
  lastUsedAt?: string;
  createdAt?: string;
  updatedAt?: string;
}

export const createdAtOf = (item: ResourceLike) => item.metadata?.createdAt ?? item.createdAt;
export const updatedAtOf = (item: ResourceLike) => item.metadata?.updatedAt ?? item.updatedAt;
