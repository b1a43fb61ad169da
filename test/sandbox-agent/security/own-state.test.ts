import { symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentClient } from "../../helpers/multipart.js";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";

/** With --data-dir and the drives dir under --root (the bwrap layout), the API cannot reach them. */
let agent: TestAgent;
let api: ReturnType<typeof agentClient>;
beforeAll(async () => {
  const base = tempDir();
  agent = await startTestAgent({ root: base, dataDir: join(base, "run/sandbox-agent"), drivesDir: join(base, "run/sandbox-drives") });
  api = agentClient(agent.url);
  symlinkSync("run/sandbox-agent", join(base, "state-link"));
});
afterAll(() => agent.stop());

const enc = (p: string) => `/filesystem/${encodeURIComponent(p)}`;

describe("the agent's own state under --root", () => {
  it.each(["/run/sandbox-agent", "/run/sandbox-agent/agent.db", "/state-link/agent.db", "/run/../run/sandbox-agent/agent.db"])(
    "GET %s is 403",
    async (path) => {
      const res = await api.get(enc(path)).set("Accept", "application/octet-stream");
      expect(res.status).toBe(403);
    },
  );
  it("cannot be overwritten or deleted", async () => {
    expect((await api.put(enc("/run/sandbox-agent/agent.db")).send({ content: "x" })).status).toBe(403);
    expect((await api.delete(enc("/run/sandbox-agent/agent.db"))).status).toBe(403);
    expect((await api.delete(`${enc("/run/sandbox-agent")}?recursive=true`)).status).toBe(403);
    expect((await api.put(enc("/run/sandbox-drives/x/evil")).send({ content: "x" })).status).toBe(403);
  });
  it("is not a working directory for processes", async () => {
    expect((await api.post("/process").send({ command: "ls", workingDir: "/run/sandbox-agent" })).status).toBe(403);
  });
  it("leaves the rest of the root usable", async () => {
    expect((await api.put(enc("/run/other.txt")).send({ content: "ok" })).status).toBe(200);
    expect((await api.get(enc("/run/other.txt"))).body.content).toBe("ok");
  });
});

describe("schedule env values at rest", () => {
  it("are sealed in agent.db, opened for the runner and show_secrets, and clear rows are sealed on start", async () => {
    const first = await startTestAgent({ token: "tok" });
    const client = agentClient(first.url, "tok");
    const created = await client.post("/schedules").send({ type: "cron", value: "0 0 1 1 *", input: { command: "true", env: { API_KEY: "hunter2-secret" } } });
    expect(created.status).toBe(200);
    const db = first.runtime.deps.db;
    const stored = (db.prepare("SELECT input FROM schedules WHERE id = ?").get(created.body.id) as { input: string }).input;
    expect(stored).not.toContain("hunter2");
    const shown = await client.get(`/schedules/${created.body.id}?show_secrets=true`);
    expect(shown.body.input.env).toEqual({ API_KEY: "hunter2-secret" });
    // A row written in clear by an older agent.
    db.prepare("UPDATE schedules SET input = ? WHERE id = ?").run(JSON.stringify({ command: "true", env: { OLD: "clear-value" } }), created.body.id);
    await first.stop({ keepFiles: true });
    const second = await startTestAgent({ token: "tok", root: first.config.root, dataDir: first.dataDir });
    try {
      const again = (second.runtime.deps.db.prepare("SELECT input FROM schedules WHERE id = ?").get(created.body.id) as { input: string }).input;
      expect(again).not.toContain("clear-value");
      const reread = await agentClient(second.url, "tok").get(`/schedules/${created.body.id}?show_secrets=true`);
      expect(reread.body.input.env).toEqual({ OLD: "clear-value" });
    } finally {
      await second.stop();
    }
  });

  it("the key file is not reachable through the API when the data dir is under the root", async () => {
    const res = await api.get(enc("/run/sandbox-agent/secrets.key")).set("Accept", "application/octet-stream");
    expect(res.status).toBe(403);
  });
});
