import { Router, type RequestHandler } from "express";
import { z } from "zod";
import { ApiError, errors } from "../../src/errors.js";
import type { UpgradeState } from "./upgrade.js";
import type { Clock } from "../../src/clock.js";
import type { SandboxEnvironment } from "../environment.js";
import { AGENT_VERSION } from "../version.js";
import type { Confinement } from "../paths/confinement.js";

/** Reference §9.10: the welcome of `/` on GET, POST, PUT, DELETE and PATCH. */
export const WELCOME = {
  message: "Welcome to your Blaxel Sandbox",
  documentation: "https://docs.blaxel.ai/Sandboxes/Overview",
  description: "sandbox-agent: the sandbox API (filesystem, processes, drives, schedules, MCP) of this sandbox.",
};

/**
 * Routes of the reference daemon that sandbox-agent will never have: they
 * answer 501 naming what is missing, rather than a bare 404.
 */
export const UNAVAILABLE_ROUTES: { method: "get" | "post" | "put" | "delete" | "all"; path: string; what: string; why: string }[] = [
  { method: "put", path: "/network/tunnel/config", what: "the network tunnel", why: "the platform's WireGuard tunnel does not exist here" },
  { method: "delete", path: "/network/tunnel", what: "the network tunnel", why: "the platform's WireGuard tunnel does not exist here" },
  { method: "put", path: "/codegen/fastapply/{*path}", what: "codegen fast-apply", why: "it needs an outside code model (Relace or Morph API key)" },
  { method: "get", path: "/codegen/reranking/{*path}", what: "codegen reranking", why: "it needs an outside code model (Relace or Morph API key)" },
  { method: "all", path: "/archive/{*rest}", what: "archive export and resume", why: "snapshots are the simulator's (control plane), not the agent's" },
  { method: "all", path: "/swagger/{*rest}", what: "the Swagger UI", why: "the API is documented in docs/sandbox-agent-api.md" },
];

const UpgradeBody = z.object({ version: z.string().optional(), baseUrl: z.string().optional() });

/** Go's Duration.String for whole milliseconds: "1h30m0s", "2m3.5s", "750ms". */
export function goDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = `${Number(((ms % 60_000) / 1000).toFixed(3))}s`;
  if (h > 0) return `${h}h${m}m${s}`;
  return m > 0 ? `${m}m${s}` : s;
}

const GO_ARCH: Record<string, string> = { x64: "amd64", arm64: "arm64", ia32: "386", arm: "arm" };

export interface SystemDeps {
  clock: Clock;
  startedAt: number;
  sandboxName: string;
  environment: SandboxEnvironment;
  upgrades: UpgradeState;
  /** How API paths are confined (an addition to the reference's fields: which mechanism runs, and why). */
  confinement: Confinement;
}

/** `/`, `POST /environment/reload`, and the 501s. (`/health` is mounted before auth by the app.) */
export function systemRouter(deps: SystemDeps): Router {
  const router = Router();
  for (const method of ["get", "post", "put", "delete", "patch"] as const) router[method]("/", (_req, res) => void res.json(WELCOME));
  router.post("/environment/reload", async (_req, res) => {
    res.json(await deps.environment.reload());
  });
  // The SDK's system.upgrade({version?, baseUrl?}). The reference downloads a release binary; here the agent is
  // replaced by a fresh one from the package on disk (version is recorded, baseUrl has nothing to fetch from).
  router.post("/upgrade", (req, res) => {
    const body = UpgradeBody.safeParse(req.body ?? {});
    if (!body.success) throw errors.badRequest(`invalid request body: ${body.error.issues[0]?.message ?? "not an object"}`);
    const trigger = deps.upgrades.trigger;
    if (!trigger)
      throw new ApiError("not_implemented", "POST /upgrade: this agent was not started by sandbox-agent's entry point, so it cannot replace itself");
    if (deps.upgrades.last.status === "running") throw errors.conflict("an upgrade is already in progress");
    res.json({ path: "", message: "Upgrade initiated" });
    res.once("finish", () => trigger(body.data.version ?? "latest"));
  });
  for (const route of UNAVAILABLE_ROUTES) {
    router[route.method](route.path, (req) => {
      throw new ApiError("not_implemented", `${req.method} ${req.path}: ${route.what} is not available in sandbox-agent (${route.why})`);
    });
  }
  return router;
}

/** `/health` with the reference's fields (§5.3); the runtime fields name Node where the reference names Go. */
export function healthHandler(deps: SystemDeps): RequestHandler {
  return (_req, res) => {
    const uptimeMs = deps.clock.now() - deps.startedAt;
    res.json({
      status: "ok",
      version: AGENT_VERSION,
      gitCommit: "unknown",
      buildTime: "unknown",
      goVersion: `node ${process.version}`,
      os: process.platform,
      arch: GO_ARCH[process.arch] ?? process.arch,
      uptime: goDuration(uptimeMs),
      uptimeSeconds: uptimeMs / 1000,
      upgradeCount: deps.upgrades.count,
      startedAt: new Date(deps.startedAt).toISOString(),
      lastUpgrade: deps.upgrades.last,
      sandbox: deps.sandboxName,
      filesystem: { confinement: deps.confinement.mode, ...("reason" in deps.confinement ? { reason: deps.confinement.reason } : {}) },
    });
  };
}
