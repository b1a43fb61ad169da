import { z } from "zod";
import { toIso as iso } from "../../src/clock.js";

/** Resource names: lowercase alphanumerics and '-', at most 49 characters (control-plane.md §3.1). */
export const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,47}[a-z0-9])?$/;
export const nameSchema = z
  .string()
  .regex(NAME_PATTERN, "lowercase letters, digits and '-', starting and ending with a letter or digit, at most 49 characters");

const labels = z.record(z.string(), z.string());

/**
 * Writable metadata. Read-only fields are accepted (the SDK sends whole
 * resources back on update) and ignored; anything else is an unknown field.
 */
export const metadataInput = z.strictObject({
  name: nameSchema.optional(),
  displayName: z.string().max(63).optional(),
  labels: labels.optional(),
  externalId: z
    .string()
    .regex(/^[A-Za-z0-9-]{1,64}$/, "letters, digits and '-', at most 64")
    .optional(),
  plan: z.unknown().optional(),
  url: z.string().optional(),
  workspace: z.string().optional(),
  createdAt: z.string().optional(),
  updatedAt: z.string().optional(),
  createdBy: z.string().optional(),
  updatedBy: z.string().optional(),
  // kind-specific metadata the SDK types carry
  vpcName: z.string().optional(),
  gatewayName: z.string().optional(),
  sharedFromWorkspace: z.string().optional(),
  resourceName: z.string().optional(),
  resourceType: z.string().optional(),
  previewName: z.string().optional(),
});
export type MetadataInput = z.infer<typeof metadataInput>;

export interface Metadata {
  name: string;
  displayName: string;
  labels: Record<string, string>;
  workspace: string;
  createdAt: string;
  updatedAt: string;
  createdBy: string;
  updatedBy: string;
  url?: string;
  externalId?: string;
  plan?: unknown;
  [key: string]: unknown;
}

export function newMetadata(input: MetadataInput, name: string, workspace: string, actor: string, nowMs: number): Metadata {
  const meta: Metadata = {
    name,
    displayName: input.displayName ?? name,
    labels: input.labels ?? {},
    workspace,
    createdAt: iso(nowMs),
    updatedAt: iso(nowMs),
    createdBy: actor,
    updatedBy: actor,
  };
  if (input.externalId !== undefined) meta.externalId = input.externalId;
  if (input.plan !== undefined) meta.plan = input.plan;
  return meta;
}

/** PUT: writable fields replace, read-only ones stay. */
export function updatedMetadata(current: Metadata, input: MetadataInput, actor: string, nowMs: number): Metadata {
  const next: Metadata = { ...current, updatedAt: iso(nowMs), updatedBy: actor };
  if (input.displayName !== undefined) next.displayName = input.displayName;
  if (input.labels !== undefined) next.labels = input.labels;
  if (input.externalId !== undefined) next.externalId = input.externalId;
  if (input.plan !== undefined) next.plan = input.plan;
  return next;
}
