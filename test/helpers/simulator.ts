import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import request from "supertest";
import { FakeClock } from "../../src/clock.js";
import { sequentialIds } from "../../src/ids.js";
import { createSimulatorApp } from "../../simulator/app.js";
import type { Listener } from "../../simulator/http/front.js";
import { SimClock } from "../../simulator/clock.js";
import type { SimConfig } from "../../simulator/config.js";
import type { SimDeps } from "../../simulator/deps.js";
import { openSimulator } from "../../simulator/root.js";
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
  return {
    deps: runtime.deps,
    serving,
    url: serving.url,
    close: async () => {
      await serving.stop(1000);
      runtime.close();
    },
  };
}

/**
 * The built simulator (dist/simulator/main.js) as a real child process on a free port, for tests that signal or
 * kill it; resolves once it prints its address. `env` is added to this process's environment; `track` gets the
 * child at once.
 */
export async function spawnSimulatorProcess(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; track?: ChildProcess[] } = {},
): Promise<{ child: ChildProcess; url: string }> {
  const main = fileURLToPath(new URL("../../dist/simulator/main.js", import.meta.url));
  const child = spawn(process.execPath, [main, "--port", "0", ...args], { env: { ...process.env, ...options.env }, stdio: ["ignore", "pipe", "pipe"] });
  options.track?.push(child); // the caller's clean-up kills it even if it never starts
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const match = /sandbox-sim listening on (\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once("exit", (code) => reject(new Error(`simulator exited with ${code}`)));
  });
  child.stderr!.resume();
  return { child, url };
}
