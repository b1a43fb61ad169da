import { z } from "zod";

/**
 * The writable body of a schedule: a superset of @blaxel/core's
 * SandboxScheduleEntry (id, type, value, input, maxExecutions) plus
 * `timezone` and `concurrencyPolicy`. Read-only fields the SDK may echo back
 * (sandbox, createdAt, ...) are accepted and ignored.
 */
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const PROCESS_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export const DEFAULT_MAX_EXECUTIONS = 100;
/** Seconds, as the SDK's SandboxScheduleInput documents: default 600, 0 = none. */
export const DEFAULT_TIMEOUT_SECONDS = 600;

export const ScheduleInputSchema = z.object(
  {
    command: z.string({ error: "is required" }).refine((c) => c.trim().length > 0, "must not be empty"),
    env: z.record(z.string(), z.string({ error: "values must be strings" })).optional(),
    keepAlive: z.boolean({ error: "must be a boolean" }).default(true),
    name: z.string().regex(PROCESS_NAME, "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit").optional(),
    timeout: z
      .number({ error: "must be a number of seconds" })
      .int("must be a whole number of seconds")
      .min(0, "must be >= 0 (0 = none)")
      .max(30 * 86_400, "must be at most 30 days")
      .default(DEFAULT_TIMEOUT_SECONDS),
    workingDir: z.string().min(1, "must not be empty").optional(),
  },
  { error: "is required: an object with at least a command" },
);

export const ScheduleBodySchema = z.object({
  id: z.string().regex(ID, "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit").optional(),
  type: z.enum(["cron", "at", "sleep"], { error: 'must be "cron", "at" or "sleep"' }),
  value: z.string({ error: "is required" }).min(1, "must not be empty"),
  timezone: z.string().min(1, "must not be empty").optional(),
  concurrencyPolicy: z.enum(["Forbid", "Allow", "Replace"], { error: 'must be "Forbid", "Allow" or "Replace"' }).default("Forbid"),
  maxExecutions: z
    .number({ error: "must be a number" })
    .int("must be a whole number")
    .min(1, "must be between 1 and 10000")
    .max(10_000, "must be between 1 and 10000")
    .default(DEFAULT_MAX_EXECUTIONS),
  input: ScheduleInputSchema,
});

export type ScheduleBody = z.infer<typeof ScheduleBodySchema>;

const LIMIT = z
  .string()
  .regex(/^\d+$/, "must be an integer between 1 and 100")
  .transform(Number)
  .refine((n) => n >= 1 && n <= 100, "must be an integer between 1 and 100")
  .optional();
const SORT = z.enum(["createdAt:desc", "createdAt:asc"], { error: 'must be "createdAt:desc" or "createdAt:asc"' }).default("createdAt:desc");

export const ListSchedulesQuery = z.object({
  limit: LIMIT,
  cursor: z.string().optional(),
  sort: SORT,
  // The SDK documents other values as ignored, not rejected.
  type: z
    .string()
    .optional()
    .transform((t) => (t === "cron" || t === "at" ? t : undefined)),
});

export const ListExecutionsQuery = z.object({
  limit: LIMIT,
  cursor: z.string().optional(),
  sort: SORT,
  scheduleId: z.string().min(1).optional(),
  status: z.enum(["running", "succeeded", "failed", "skipped"], { error: 'must be "running", "succeeded", "failed" or "skipped"' }).optional(),
});
