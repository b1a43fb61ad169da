import express from "express";
import { accessLog, errorMiddleware, notFoundHandler } from "../src/http.js";
import { callerAccess } from "./auth/access.js";
import { oauthRouter } from "./auth/oauth-routes.js";
import type { SimDeps } from "./deps.js";
import { createConsoleHandler } from "./console/serve.js";
import { createFront, renderError, type Listener } from "./http/front.js";
import { unauthenticatedBodyBudget } from "./http/body-budget.js";
import { apiVersion, jsonContentType } from "./http/middleware.js";
import { Dispatcher } from "./http/operation.js";
import { createMetricsRouter, createMetricsTestHooksRouter } from "./metrics/routes.js";
import { jobDataHandler } from "./jobs/data-route.js";
import { uploadHandler } from "./sandboxes/upload-route.js";
import { ImageUploads } from "./sandboxes/image-uploads.js";
import { allOperations } from "./operations.js";
import { faultInjection, testHooksRouter } from "./test-hooks/routes.js";

/**
 * Builds the control-plane HTTP listener from its dependencies. Never listens:
 * main.ts does, tests use supertest or listen(0). Operations of the table are
 * answered by the front (http/front.ts); Express serves the rest.
 */
export function createSimulatorApp(deps: SimDeps): Listener {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("query parser", "extended");
  // The web console (/console, simulator/console): static pages with their own headers, no credential needed to load them.
  const consolePages = createConsoleHandler();
  app.use((req, res, next) => {
    if (!consolePages(req, res)) next();
  });
  app.use(jsonContentType());
  app.use(accessLog(deps.logger));
  if (deps.testHooks.enabled) {
    app.use(faultInjection(deps));
    app.use(createMetricsTestHooksRouter({ usage: deps.usage }));
    app.use("/_sim", express.json(), testHooksRouter(deps));
  }
  app.get("/health", (_req, res) => {
    const starts = deps.sandboxes.startsHealth();
    res.send(
      JSON.stringify({
        status: "ok",
        workspace: deps.config.workspace,
        testHooks: deps.testHooks.enabled,
        time: new Date(deps.clock.now()).toISOString(),
        sandboxes: starts && { ...deps.sandboxIsolation, ...starts },
        defaultImage: deps.images.prebuildStatus(),
      }),
    );
  });
  // The task data blStartJob fetches (BL_EXECUTION_DATA_URL): the execution's secret is in the path.
  app.get("/job-data/:workspace/:job/:execution/:token", jobDataHandler(deps));
  // The build context of ImageInstance.build / bl deploy (X-Blaxel-Upload-Url): the URL's token is the credential.
  const uploads = new ImageUploads(deps.images.store, deps.logger);
  app.put("/uploads/:token", uploadHandler(deps, uploads));
  const v0 = express.Router();
  // Every body Express reads under /v0 comes before authentication (OAuth) or is for no route: small, and capped together.
  v0.use(unauthenticatedBodyBudget());
  v0.use(apiVersion());
  v0.use(oauthRouter(deps));
  // Account metrics (simulator/metrics): the caller's account, admin flag and visible workspaces come from auth.
  v0.use(
    "/accounts/:accountId/metrics",
    createMetricsRouter({ usage: deps.usage, meter: deps.meter, cursors: deps.cursors, access: (req) => callerAccess(deps, req) }),
  );
  app.use("/v0", v0);
  app.use(notFoundHandler());
  app.use(errorMiddleware(renderError, deps.logger));
  const { accounts, credentials, clock, jwtSecret, principals } = deps;
  return createFront(deps, new Dispatcher({ accounts, credentials, clock, jwtSecret, principals }, allOperations(deps, uploads)), app);
}
