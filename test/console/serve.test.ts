import { spawn } from "node:child_process";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import request from "supertest";
import { packageRoot } from "../../src/package-paths.js";
import { createConsoleHandler } from "../../simulator/console/serve.js";
import { trackedTempDir } from "../helpers/temp-dirs.js";
import { startTestSim } from "../helpers/simulator.js";

/** Serving /console without a browser: the start-up line, a missing build, what is not the console's. */
describe("console serving", () => {
  const sim = startTestSim();
  afterAll(() => sim.close());

  it("answers 503 with the simulator's error shape when the console is not built", async () => {
    const handler = createConsoleHandler({ dir: trackedTempDir("console-empty-") });
    const res = await request((req: IncomingMessage, res: ServerResponse) => {
      if (!handler(req, res)) res.writeHead(418).end();
    }).get("/console");
    expect(res.status).toBe(503);
    expect(res.body).toEqual({
      error: "service_unavailable",
      code: 503,
      message: "the console is not built: run `npm run build` (it bundles console/ into dist/console)",
    });
  });

  it("leaves other methods and paths to the API (404 in its shape)", async () => {
    const post = await request(sim.app).post("/console").send({});
    expect(post.status).toBe(404);
    expect(post.body).toMatchObject({ error: "not_found", code: 404 });
    expect((await request(sim.app).get("/consoles")).status).toBe(404);
    expect((await request(sim.app).get("/console/nope.html")).body).toMatchObject({ error: "not_found", message: "no console file /console/nope.html" });
  });

  it("reads the fault rules and transition mode the test-hooks page shows", async () => {
    expect((await request(sim.app).get("/_sim/transitions")).body).toEqual({ mode: "timed" });
    await request(sim.app).post("/_sim/transitions").send({ mode: "manual" });
    expect((await request(sim.app).get("/_sim/transitions")).body).toEqual({ mode: "manual" });
    const rules = [{ method: "POST", path: "/v0/sandboxes", status: 503, times: 2 }];
    await request(sim.app).put("/_sim/faults").send({ rules });
    await sim.api.post("/v0/sandboxes", { metadata: { name: "x" } }).expect(503);
    expect((await request(sim.app).get("/_sim/faults")).body).toEqual({ rules: [{ ...rules[0], times: 1 }] });
  });

  it("is linked from the simulator's start-up lines", async () => {
    const child = spawn(process.execPath, [join(packageRoot(), "dist", "simulator", "main.js"), "--port", "0", "--log-level", "silent"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      let out = "";
      const line = await new Promise<string>((resolve, reject) => {
        child.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          const match = /^sandbox-sim console: (http:\/\/\S+\/console) \(sign in with BL_API_KEY\)$/m.exec(out);
          if (match && /BL_API_KEY=/.test(out)) resolve(match[1]!);
        });
        child.on("exit", (code) => reject(new Error(`sandbox-sim exited (${code}): ${out}`)));
      });
      const page = await fetch(line);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("<title>sandbox-sim console</title>");
    } finally {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    }
  });
});
