/** An image record's shape, apart from image-records.ts so that image-usage.ts (which image-records.ts calls) can name it without a circle. */
export const IMAGE_KIND = "image";
export const RESOURCE_TYPES = ["agents", "functions", "sandboxes", "jobs"] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];
export const SINGULAR: Record<ResourceType, string> = { agents: "agent", functions: "function", sandboxes: "sandbox", jobs: "job" };

export interface Tag {
  name: string;
  size: number;
  createdAt: string;
  updatedAt: string;
  __layers: string[];
}

export interface ImageDoc {
  metadata: {
    name: string;
    displayName: string;
    resourceType: ResourceType;
    workspace: string;
    sourceWorkspace?: string;
    status: string;
    events: unknown[];
    createdAt: string;
    updatedAt: string;
    lastDeployedAt: string;
  };
  spec: { size: number; tags: Tag[] };
  __layerSizes: Record<string, number>;
}
