import { errors } from "../../src/errors.js";
import type { Operation } from "../http/operation.js";
import type { ResourceStore } from "../store/resources.js";
import { IMAGE_KIND, RESOURCE_TYPES, type ImageDoc, type ResourceType } from "./image-doc.js";
import { BUILD_EVENT } from "./image-push.js";

/**
 * `GET /v0/observability/logs`, as far as the CLI's build log watcher reads it (blaxel-ai/toolkit
 * cli/monitor/logs.go: `bl push`, `bl deploy`): `?resourceType=<plural>&workloadIds=<name>[,...]&start&end
 * &limit&offset&search`, answering `{<name>: {logs: [{timestamp, message, severity, trace_id}], totalCount}}`,
 * newest first. What the simulator has to say there is its builds' lines: a sandbox's upload build (its events of
 * type "build") and a pushed image's (`ai.blaxel.controlplane.buildimage.*`), between `start` and `end` (UTC,
 * `2006-01-02T15:04:05`). Workloads' own output is not collected here (their processes' logs are on their agents).
 */

interface TimedEvent {
  type?: string;
  status?: string;
  message?: string;
  time?: string;
}

/** OpenTelemetry's severity numbers: INFO for a build's lines, ERROR for a failure. */
const INFO = 9;
const ERROR = 17;
const MAX_LIMIT = 1000;

/** `2006-01-02T15:04:05` (the CLI's form, UTC without a zone) or a full ISO time; undefined when absent. */
function parseTime(value: unknown, name: string): number | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  const ms = Date.parse(/[zZ]|[+-]\d\d:\d\d$/.test(value) ? value : `${value}Z`);
  if (Number.isNaN(ms)) throw errors.badRequest(`query.${name}: a time such as 2026-01-02T15:04:05`);
  return ms;
}

function buildLines(resources: ResourceStore, workspace: string, type: ResourceType, name: string): TimedEvent[] {
  const lines: TimedEvent[] = [];
  if (type === "sandboxes") {
    const sandbox = resources.get<{ events?: TimedEvent[] }>(workspace, "sandbox", name);
    for (const e of sandbox?.doc.events ?? []) if (e.type === "build" || e.status === "FAILED") lines.push(e);
  }
  const image = resources.get<ImageDoc>(workspace, IMAGE_KIND, name, type);
  for (const e of (image?.doc.metadata.events ?? []) as TimedEvent[]) if (e.type?.startsWith(`${BUILD_EVENT}.`)) lines.push(e);
  return lines;
}

export function buildLogOperations(deps: { resources: ResourceStore }): Operation[] {
  return [
    {
      id: "getObservabilityLogs",
      method: "get",
      path: "/observability/logs",
      scope: "admin",
      handler: (ctx) => {
        const q = ctx.query;
        const type = String(q.resourceType ?? "");
        if (!(RESOURCE_TYPES as readonly string[]).includes(type)) throw errors.badRequest(`query.resourceType: expected one of ${RESOURCE_TYPES.join(", ")}`);
        const names = String(q.workloadIds ?? "")
          .split(",")
          .map((n) => n.trim())
          .filter(Boolean);
        if (names.length === 0) throw errors.badRequest("query.workloadIds: at least one name");
        const start = parseTime(q.start, "start") ?? Number.NEGATIVE_INFINITY;
        const end = parseTime(q.end, "end") ?? Number.POSITIVE_INFINITY;
        const limit = Math.min(Math.max(Number(q.limit ?? 100) || 100, 1), MAX_LIMIT);
        const offset = Math.max(Number(q.offset ?? 0) || 0, 0);
        const search = typeof q.search === "string" ? q.search : "";
        const answer: Record<string, { logs: { timestamp: string; message: string; severity: number; trace_id: string }[]; totalCount: number }> = {};
        for (const name of names) {
          const logs = buildLines(deps.resources, ctx.workspace, type as ResourceType, name)
            .filter((e) => {
              const at = Date.parse(e.time ?? "");
              return at >= start && at <= end && (search === "" || (e.message ?? "").includes(search));
            })
            .map((e) => ({
              timestamp: e.time!,
              message: e.message ?? "",
              severity: e.type?.endsWith(".failed") || e.status === "FAILED" ? ERROR : INFO,
              trace_id: "",
            }))
            .reverse(); // newest first, as the platform answers
          answer[name] = { logs: logs.slice(offset, offset + limit), totalCount: logs.length };
        }
        return answer;
      },
    },
  ];
}
