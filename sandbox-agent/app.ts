import express, { type Express } from "express";
import { CursorCodec } from "../src/cursor.js";
import { errorMiddleware, accessLog, notFoundHandler } from "../src/http.js";
import type { AgentDeps } from "./agent.js";
import { filesystemRouter } from "./filesystem/routes.js";
import { drivesRouter } from "./drives/routes.js";
import { cors, guardUnauthenticated, noCache, requireToken } from "./http/middleware.js";
import { multipartRouter } from "./multipart/routes.js";
import { processRouter } from "./process/routes.js";
import { scheduleExecutionsRouter, schedulesRouter } from "./schedules/routes.js";
import { AGENT_VERSION } from "./version.js";

/**
 * Builds the sandbox-local HTTP API from its dependencies. Never listens:
 * main.ts does, and tests use supertest or listen(0).
 */
export function createApp(deps: AgentDeps): Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  // Order matters: with a token, CORS answers preflights before auth (browsers
  // send no credentials on OPTIONS; the SDK in a browser needs it); without
  // one there is no CORS at all and browser-made requests are refused.
  // no-cache and the access log apply to everything.
  app.use(noCache());
  app.use(accessLog(deps.logger));
  if (deps.config.token) app.use(cors());
  else if (!deps.config.noAuth) app.use(guardUnauthenticated());
  app.use(requireToken(deps.config.token));

  app.get("/health", (_req, res) => {
    const now = deps.clock.now();
    res.json({
      status: "ok",
      version: AGENT_VERSION,
      sandbox: deps.config.sandboxName,
      startedAt: new Date(deps.startedAt).toISOString(),
      uptimeSeconds: (now - deps.startedAt) / 1000,
    });
  });

  app.use("/filesystem-multipart", multipartRouter(deps.multipart, deps.config.maxPartSize));
  app.use("/filesystem", filesystemRouter(deps.paths));
  app.use("/drives", drivesRouter(deps.drives));
  app.use("/process", processRouter(deps.processes));
  const scheduleRoutes = { cursors: new CursorCodec({ now: () => deps.clock.now() }), tokenRequired: Boolean(deps.config.token) };
  app.use("/schedules", schedulesRouter(deps.schedules.service, scheduleRoutes));
  app.use("/schedule-executions", scheduleExecutionsRouter(deps.schedules.service, scheduleRoutes));

  app.use(notFoundHandler());
  app.use(errorMiddleware((err) => ({ error: err.message }), deps.logger));
  return app;
}
