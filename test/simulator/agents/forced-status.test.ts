import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";

/**
 * Status and events always tell the truth for the test hooks too: a
 * status forced on a real sandbox (POST /_sim/transitions/step with status)
 * moves its agent too. (npm run build first: the agents run from dist/.)
 */
const KEY = "forced-admin-key";
let sim: ServedSimulator;
beforeAll(async () => {
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, testHooks: true, logLevel: "silent" });
});
afterAll(async () => {
  await sim?.stop();
});

const auth = (r: request.Test) => r.set("authorization", `Bearer ${KEY}`).set("x-blaxel-workspace", "default");
const force = (name: string, status: string) => request(sim.url).post("/_sim/transitions/step").send({ kind: "sandbox", name, status });
/** Runs a shell command in the sandbox through the proxy (its cwd is the sandbox's root). */
async function sh(sandbox: string, command: string): Promise<string> {
  const res = await auth(request(sim.url).post(`/sbx/default/${sandbox}/process`))
    .send({ command, waitForCompletion: true })
    .expect(200);
  return String(res.body.stdout ?? res.body.logs ?? "").trim();
}
const agentOf = (name: string) => sim.agents.get("default", name);

describe("a forced sandbox status moves its agent", () => {
  for (const status of ["DEACTIVATED", "ARCHIVED", "FAILED", "DELETING", "TERMINATED"]) {
    it(`forcing ${status} stops the agent; forcing DEPLOYED starts it again on the same files`, async () => {
      const name = `forced-${status.toLowerCase()}`;
      await auth(request(sim.url).post("/v0/sandboxes")).send({ metadata: { name } }).expect(200);
      await sh(name, "echo kept > kept.txt");
      expect(agentOf(name)?.state).toBe("running");

      const stopped = await force(name, status).expect(200);
      expect(stopped.body.status).toBe(status);
      expect(agentOf(name)).toBeUndefined();
      const got = await auth(request(sim.url).get(`/v0/sandboxes/${name}`)).expect(200);
      expect(got.body.status).toBe(status);
      expect(got.body.events.at(-1).message).toMatch(/forced by a test hook\): the sandbox agent is stopped/);
      // Stopped, it exists without an agent: 503 WORKLOAD_UNAVAILABLE naming its status (a retry may work);
      // deleted, 404 WORKLOAD_NOT_FOUND (do not retry).
      const down = await auth(request(sim.url).post(`/sbx/default/${name}/process`)).send({ command: "true" });
      const gone = status === "DELETING" || status === "TERMINATED";
      expect(down.status).toBe(gone ? 404 : 503);
      expect(down.body.error).toMatchObject({
        code: gone ? "WORKLOAD_NOT_FOUND" : "WORKLOAD_UNAVAILABLE",
        retryable: !gone,
        message: expect.stringContaining(status),
      });

      const started = await force(name, "DEPLOYED").expect(200);
      expect(started.body.status).toBe("DEPLOYED");
      expect(agentOf(name)?.state).toBe("running");
      expect(await sh(name, "cat kept.txt")).toBe("kept");
      await auth(request(sim.url).delete(`/v0/sandboxes/${name}`)).expect(200);
    });
  }
});
