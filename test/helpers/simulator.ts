import request from "supertest";
import { FakeClock } from "../../src/clock.js";
import { sequentialIds } from "../../src/ids.js";
import { createSimulatorApp } from "../../simulator/app.js";
import type { Listener } from "../../simulator/http/front.js";
import { SimClock } from "../../simulator/clock.js";
import type { SimConfig } from "../../simulator/config.js";
import { openSimulator, type SimDeps } from "../../simulator/deps.js";
import { listen, type Serving } from "../../src/serve.js";

export const ADMIN_KEY = "test-admin-key-0001";
export const WS = "default";

export interface TestSim {
  deps: SimDeps;
  app: Listener;
  base: FakeClock;
  clock: SimClock;
  /** supertest agent-like helpers carrying the admin key, workspace and (by default) the paginated version. */
  api: ReturnType<typeof api>;
  close(): void;
}

/** A simulator on a fake clock (time moves only when told), in memory, test hooks on. */
export function startTestSim(config: Partial<SimConfig> = {}): TestSim {
  const base = new FakeClock("2026-05-01T10:00:00Z");
  const clock = new SimClock(base);
  const runtime = openSimulator({ apiKey: ADMIN_KEY, testHooks: true, publicUrl: "http://127.0.0.1:8081", ...config }, { clock, ids: sequentialIds("id") });
  const app = createSimulatorApp(runtime.deps);
  return { deps: runtime.deps, app, base, clock, api: api(app), close: runtime.close };
}

export function api(app: Listener, key = ADMIN_KEY, workspace = WS, version = "2026-04-28") {
  const withHeaders = (t: request.Test) => {
    let r = t.set("X-Blaxel-Authorization", `Bearer ${key}`).set("Blaxel-Version", version);
    if (workspace) r = r.set("X-Blaxel-Workspace", workspace);
    return r;
  };
  return {
    get: (path: string) => withHeaders(request(app).get(path)),
    post: (path: string, body?: object) => withHeaders(request(app).post(path)).send(body as object),
    put: (path: string, body?: object) => withHeaders(request(app).put(path)).send(body as object),
    delete: (path: string) => withHeaders(request(app).delete(path)),
  };
}

/** Starts the simulator on 127.0.0.1:0 (real clock) for SDK tests. */
export async function serveTestSim(config: Partial<SimConfig> = {}): Promise<{ deps: SimDeps; serving: Serving; url: string; close(): Promise<void> }> {
  const runtime = openSimulator({ apiKey: ADMIN_KEY, testHooks: true, ...config });
  const serving = await listen(createSimulatorApp(runtime.deps), "127.0.0.1", 0);
  runtime.deps.urls.base = serving.url;
  return { deps: runtime.deps, serving, url: serving.url, close: async () => { await serving.stop(1000); runtime.close(); } };
}
