import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSimulatorApp } from "../../../simulator/app.js";
import { applySeed, SeedSchema } from "../../../simulator/accounts/seed.js";
import { openSimulator, type SimRuntime } from "../../../simulator/root.js";
import { SandboxAgents } from "../../../simulator/agents/registry.js";
import { HOST_ROOT } from "../../../simulator/images/sandbox-images.js";
import { createSimulatorSandboxProxy } from "../../../simulator/sandbox-proxy.js";
import { ProcessLauncher, type SupervisorEvent } from "../../../simulator/launcher/index.js";
import type { SandboxProxy } from "../../../simulator/proxy/index.js";
import { eventually, tempBase } from "../launcher/helpers.js";

const ADMIN = "agents-admin-key-1";
const OTHER = "other-workspace-key-1";
const base = tempBase("agents-");
let sim: SimRuntime;
let agents: SandboxAgents;
let proxy: SandboxProxy;
let server: Server;
let url = "";
const events: { sandbox: string; event: SupervisorEvent }[] = [];

beforeAll(async () => {
  sim = openSimulator({ apiKey: ADMIN });
  applySeed(
    sim.deps,
    SeedSchema.parse({
      accounts: [{ id: "acc-2" }],
      workspaces: [{ name: "other", accountId: "acc-2" }],
      users: [{ email: "o@example.com", accountId: "acc-2", workspaces: ["other"], apiKey: OTHER }],
    }),
  );
  agents = new SandboxAgents({
    launcher: new ProcessLauncher(),
    images: HOST_ROOT,
    dir: base,
    supervisor: { initialDelayMs: 60_000 },
    onEvent: (_ws, sandbox, event) => events.push({ sandbox, event }),
  });
  proxy = createSimulatorSandboxProxy(sim.deps, agents);
  const app = createSimulatorApp(sim.deps);
  server = createServer((req, res) => {
    if (!proxy.handle(req, res)) app(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await agents.stopAll();
  proxy.close();
  server.closeAllConnections();
  server.close();
  sim.close();
  rmSync(base, { recursive: true, force: true });
});

const as = (key: string) => ({ authorization: `Bearer ${key}` });

describe("the simulator's sandbox agents behind the proxy", () => {
  it("serves a sandbox at /sbx/{workspace}/{sandbox} for the workspace's credentials only", async () => {
    await agents.start("default", "box", { env: { FROM_SPEC: "1" } });
    const put = await fetch(`${url}/sbx/default/box/filesystem/hello.txt`, {
      method: "PUT",
      headers: { ...as(ADMIN), "content-type": "application/json" },
      body: JSON.stringify({ content: "hi" }),
    });
    expect(put.status).toBe(200);
    expect(existsSync(join(agents.sandboxDir("default", "box"), "root", "hello.txt"))).toBe(true);
    // The control plane still answers beside the proxy.
    expect((await fetch(`${url}/health`)).status).toBe(200);

    const other = await fetch(`${url}/sbx/default/box/filesystem/hello.txt`, { headers: as(OTHER) });
    expect(other.status).toBe(403);
    expect(await other.json()).toMatchObject({ error: { code: "FORBIDDEN", status: 403, message: expect.stringContaining('"default"') } });
    const bad = await fetch(`${url}/sbx/default/box/filesystem/hello.txt`, { headers: as("not-a-key-at-all") });
    expect(bad.status).toBe(401);
  });

  it("routes sbx-{sandbox}-{workspaceId}.{region}.localhost to the same sandbox", async () => {
    const id = (sim.deps.accounts.workspace("default")!.doc as { id: string }).id;
    const { request } = await import("node:http");
    const body = await new Promise<string>((resolve, reject) => {
      request(`${url}/filesystem/hello.txt`, { headers: { ...as(ADMIN), host: `sbx-box-${id}.local.localhost` } }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d)).on("end", () => resolve(text));
      })
        .on("error", reject)
        .end();
    });
    expect(JSON.parse(body).content).toBe("hi");
  });

  it("a crashed agent is reported, and the sandbox answers 503 naming it until it is back", async () => {
    const sup = await agents.start("default", "fragile");
    process.kill(sup.pid!, "SIGKILL");
    await eventually(() => events.some((e) => e.sandbox === "fragile" && e.event.type === "crashed"));
    const res = await fetch(`${url}/sbx/default/fragile/filesystem/`, { headers: as(ADMIN) });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: { code: "WORKLOAD_UNAVAILABLE", message: expect.stringContaining('sandbox "fragile"') } });
  });

  it("stop then removeFiles: 404 afterwards and the files are gone", async () => {
    await agents.start("default", "temp");
    await agents.stop("default", "temp");
    agents.removeFiles("default", "temp");
    expect(existsSync(agents.sandboxDir("default", "temp"))).toBe(false);
    expect((await fetch(`${url}/sbx/default/temp/filesystem/`, { headers: as(ADMIN) })).status).toBe(404);
  });
});
