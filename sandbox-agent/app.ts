import express, { type Express } from "express";
import { CursorCodec } from "../src/cursor.js";
import { errorMiddleware, accessLog, notFoundHandler } from "../src/http.js";
import type { UpgradeListener } from "../src/serve.js";
import type { AgentDeps } from "./agent.js";
import { filesystemRouter } from "./filesystem/routes.js";
import { drivesRouter } from "./drives/routes.js";
import { encodedSeparator } from "./http/encoded-separator.js";
import { browserRefusal, cors, guardUnauthenticated, noCache, requireToken } from "./http/middleware.js";
import { treeRouter } from "./filesystem/tree.js";
import { CONTENT_SEARCH, FIND, FUZZY_SEARCH, searchRouter } from "./search/routes.js";
import { watchRouter } from "./watch/routes.js";
import { multipartRouter } from "./multipart/routes.js";
import { OwnerNames } from "./filesystem/owners.js";
import { mcpRouter } from "./mcp/server.js";
import { networkRouter } from "./network/routes.js";
import { createPortForwarder } from "./ports/forward.js";
import { processRouter } from "./process/routes.js";
import { scheduleExecutionsRouter, schedulesRouter } from "./schedules/routes.js";
import { healthHandler, systemRouter } from "./system/routes.js";
import { createTerminals, queryTokenAuth, TERMINAL_PATH } from "./terminal/routes.js";

/**
 * Builds the sandbox-local HTTP API from its dependencies. Never listens:
 * main.ts does, and tests use supertest or listen(0).
 */
export function createApp(deps: AgentDeps): Express & UpgradeListener {
  const app: Express & UpgradeListener = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  // /port/{n}/... goes to the in-sandbox server before anything else: its replies keep the app's own
  // headers (no CORS or no-cache of the agent's), and src/serve.ts's listen() routes upgrades to it.
  // Without a token, /port gets the Host and Origin checks the rest of the app gets from guardUnauthenticated.
  const guarded = !deps.config.token && !deps.config.noAuth;
  const ports = createPortForwarder(deps.config.token, { logger: deps.logger, browserRefusal: guarded ? browserRefusal : undefined });
  // /terminal/ws (the reference's web terminal) is the agent's own upgrade; every other one is /port's.
  const terminals = deps.config.terminalDisabled
    ? undefined
    : createTerminals({
        paths: deps.paths,
        env: () => deps.environment.current(),
        logger: deps.logger,
        token: deps.config.token,
        wrapper: deps.config.processWrapper,
        entry: deps.terminalEntry,
        browserRefusal: guarded ? browserRefusal : undefined,
      });
  app.onUpgrade = (req, socket, head) => {
    if (!terminals?.upgrade(req, socket, head)) ports.upgrade(req, socket, head);
  };
  app.use((req, res, next) => {
    if (!ports.handle(req, res)) next();
  });
  // Order matters: with a token, CORS answers preflights before auth (browsers
  // send no credentials on OPTIONS; the SDK in a browser needs it); without
  // one there is no CORS at all and browser-made requests are refused.
  // no-cache and the access log apply to everything.
  app.use(noCache());
  app.use(accessLog(deps.logger));
  if (deps.config.token) app.use(cors());
  else if (!deps.config.noAuth) app.use(guardUnauthenticated());
  if (terminals) app.use(queryTokenAuth());
  app.use(requireToken(deps.config.token));

  const system = {
    clock: deps.clock,
    startedAt: deps.startedAt,
    sandboxName: deps.config.sandboxName,
    environment: deps.environment,
    upgrades: deps.upgrades,
    confinement: deps.paths.confinement,
  };
  app.get("/health", healthHandler(system));
  if (terminals) app.get(TERMINAL_PATH, terminals.page);
  app.use(systemRouter(system));

  app.use("/filesystem-multipart", multipartRouter(deps.multipart, deps.config.maxPartSize));
  app.use(encodedSeparator());
  // Before /filesystem: GET/PUT/DELETE of /filesystem/tree[/...] are the tree API (other methods fall through).
  app.use("/filesystem/tree", treeRouter(deps.paths));
  app.use("/filesystem", filesystemRouter(deps.paths));
  app.use("/filesystem-find", searchRouter(deps.paths, deps.search, FIND));
  app.use("/filesystem-search", searchRouter(deps.paths, deps.search, FUZZY_SEARCH));
  app.use("/filesystem-content-search", searchRouter(deps.paths, deps.search, CONTENT_SEARCH));
  app.use("/watch", watchRouter(deps.paths, deps.watches, deps.clock));
  app.use("/drives", drivesRouter(deps.drives));
  app.use("/process", processRouter(deps.processes, deps.clock, { keepAliveDisabled: deps.config.keepAliveDisabled }));
  app.use("/network", networkRouter(deps.processes, deps.portMonitors));
  app.use(
    "/mcp",
    mcpRouter({ paths: deps.paths, processes: deps.processes, clock: deps.clock, owners: new OwnerNames(), keepAliveDisabled: deps.config.keepAliveDisabled }),
  );
  const scheduleRoutes = { cursors: new CursorCodec({ now: () => deps.clock.now() }), tokenRequired: Boolean(deps.config.token) };
  app.use("/schedules", schedulesRouter(deps.schedules.service, scheduleRoutes));
  app.use("/schedule-executions", scheduleExecutionsRouter(deps.schedules.service, scheduleRoutes));

  app.use(notFoundHandler());
  app.use(errorMiddleware((err) => ({ error: err.message }), deps.logger));
  return app;
}
