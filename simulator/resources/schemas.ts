import { z } from "zod";

/** Pieces shared by several kinds' spec schemas (control-plane.md §3.1). */
export const envSchema = z.strictObject({ name: z.string().optional(), value: z.string().optional(), secret: z.boolean().optional() });
export const portSchema = z.strictObject({
  name: z.string().optional(),
  target: z.number().int().min(1).max(65535),
  protocol: z.enum(["HTTP", "TCP", "UDP", "TLS"]).optional(),
});
export const flavorSchema = z.strictObject({ name: z.string().optional(), type: z.string().optional() });
export const revisionSchema = z.looseObject({
  active: z.string().optional(),
  canary: z.string().optional(),
  canaryPercent: z.number().optional(),
  stickySessionTtl: z.number().optional(),
  traffic: z.number().optional(),
});
export const triggerSchema = z.looseObject({
  id: z.string().optional(),
  type: z.string().optional(),
  enabled: z.boolean().optional(),
  configuration: z.record(z.string(), z.unknown()).optional(),
});
export const volumeAttachmentSchema = z.looseObject({
  name: z.string().optional(),
  mountPath: z.string().optional(),
  readOnly: z.boolean().optional(),
  type: z.string().optional(),
  sizeMb: z.number().optional(),
});
export const names = z.array(z.string());

/** Runtime objects: known fields typed, extra keys accepted (the SDK sends e.g. generation, snapshotEnabled). */
export const runtimeSchema = z.looseObject({
  envs: z.array(envSchema).optional(),
  ports: z.array(portSchema).optional(),
  image: z.string().optional(),
  memory: z.number().int().min(0).optional(),
  generation: z.string().optional(),
  minScale: z.number().int().optional(),
  maxScale: z.number().int().optional(),
  timeout: z.number().int().optional(),
  maxRetries: z.number().int().optional(),
  type: z.string().optional(),
  ttl: z.string().optional(),
  expires: z.string().optional(),
});
