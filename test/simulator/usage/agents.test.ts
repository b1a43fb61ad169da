import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { SandboxAgents } from "../../../simulator/agents/registry.js";
import { recordAgentEvent } from "../../../simulator/sandboxes/status.js";
import { createSimulatorApp } from "../../../simulator/app.js";
import { assembleDeps, openState, type SimRuntime } from "../../../simulator/root.js";
import { describeLauncher, ProcessLauncher } from "../../../simulator/launcher/index.js";
import { HOST_ROOT } from "../../../simulator/images/sandbox-images.js";
import { SIMULATED_JOBS } from "../../../simulator/jobs/executor.js";
import { resourceUid } from "../../../simulator/resources/resource-usage.js";
import { eventually, tempBase } from "../launcher/helpers.js";

/**
 * Sandboxes with real agents are billed for the agents' run time:
 * from the moment the agent is healthy until it stops or crashes. The
 * simulator clock is frozen, so only test-hook advances count.
 * (npm run build first: the agents run from dist/.)
 */
const KEY = "usage-agents-admin-key";
const HOUR = 3_600_000;
const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

function client(url: string) {
  const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json", "x-blaxel-workspace": "default" };
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return {
    call,
    advance: async (ms: number) => expect((await call("POST", "/_sim/clock", { advanceMs: ms })).status).toBe(200),
    computeGbs: async (sandbox: string) => {
      const q = new URLSearchParams({
        startTime: "2026-01-01T00:00:00Z",
        endTime: "2028-01-01T00:00:00Z",
        groupBy: "billing_dimension,resource_name",
        resolution: "monthly",
      });
      const res = await call("GET", `/v0/accounts/local/metrics?${q}`);
      expect(res.status, await res.clone().text()).toBe(200);
      const body = (await res.json()) as { data: { billingDimension: string; resourceName: string; summary: { usage: number } }[] };
      return body.data.find((e) => e.billingDimension === "sandbox_compute_runtime_gbs" && e.resourceName === sandbox)?.summary.usage ?? 0;
    },
  };
}

describe("a real sandbox agent's run time is metered", () => {
  it("through serveSimulator: from healthy to delete, memory × time", async () => {
    const sim: ServedSimulator = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, testHooks: true, logLevel: "silent" });
    cleanups.push(() => sim.stop());
    const api = client(sim.url);
    expect((await api.call("POST", "/_sim/clock", { freeze: true })).status).toBe(200);
    const created = await api.call("POST", "/v0/sandboxes", { metadata: { name: "metered" }, spec: { runtime: { memory: 2048 } } });
    expect(created.status, await created.clone().text()).toBe(200); // answered once the agent is healthy
    await api.advance(HOUR);
    expect(await api.computeGbs("metered")).toBeCloseTo(7200, 6);
    expect((await api.call("DELETE", "/v0/sandboxes/metered")).status).toBe(200);
    await eventually(() => sim.agents.get("default", "metered") === undefined);
    await api.advance(HOUR);
    expect(await api.computeGbs("metered")).toBeCloseTo(7200, 6);
  });

  it("a crash closes the span; the agent down is not billed", async () => {
    const base = tempBase("usage-agents-");
    const state = openState({ apiKey: KEY, testHooks: true });
    // Wired as serveSimulator does, with a restart delay long enough to see the agent down.
    const launcher = new ProcessLauncher();
    const agents = new SandboxAgents({
      launcher,
      images: HOST_ROOT,
      dir: base,
      supervisor: { initialDelayMs: 60_000 },
      onEvent: (workspace, sandbox, event) => {
        recordAgentEvent(state.core, workspace, sandbox, event);
        deps.onSandboxAgentEvent(workspace, sandbox, event);
      },
    });
    const deps = assembleDeps(state.core, { agents, jobs: SIMULATED_JOBS, images: HOST_ROOT, sandboxIsolation: describeLauncher(launcher) });
    const runtime: SimRuntime = { deps, close: state.close };
    const app = createSimulatorApp(deps);
    const server: Server = createServer((req, res) => app(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    cleanups.push(async () => {
      await agents.stopAll();
      server.closeAllConnections();
      server.close();
      runtime.close();
      rmSync(base, { recursive: true, force: true });
    });
    const api = client(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    expect((await api.call("POST", "/_sim/clock", { freeze: true })).status).toBe(200);
    const created = await api.call("POST", "/v0/sandboxes", { metadata: { name: "fragile" }, spec: { runtime: { memory: 1024 } } });
    expect(created.status, await created.clone().text()).toBe(200);
    const uid = resourceUid(deps.resources.get("default", "sandbox", "fragile")!);
    expect(deps.meter.isOpen(uid, "sandbox_compute_runtime_gbs")).toBe(true);
    await api.advance(HOUR / 2);
    process.kill(agents.get("default", "fragile")!.pid!, "SIGKILL");
    await eventually(() => !deps.meter.isOpen(uid, "sandbox_compute_runtime_gbs"));
    await api.advance(HOUR);
    expect(await api.computeGbs("fragile")).toBeCloseTo(1800, 6);
  });
});
