import { describe, expect, it } from "vitest";
import { applicationTarget } from "../../../simulator/applications/app-proxy.js";
import { applicationOfLaunch, runsSandboxApi } from "../../../simulator/applications/runner.js";
import { entrypointService } from "../../../simulator/images/entrypoint.js";
import { startTestSim } from "../../helpers/simulator.js";
import { applicationPort, DEFAULT_APPLICATION_PORT } from "../../../simulator/applications/app-status.js";

/** The logic around running applications that needs no workload: which URL is an application's, which program is the daemon, which port. */

describe("application URLs", () => {
  it("maps /{workspace}/applications/{name}/... to the application and the rest of the path, query kept", () => {
    expect(applicationTarget("/ws/applications/app/a/b?x=1&y=%20")).toEqual({ workspace: "ws", name: "app", path: "/a/b?x=1&y=%20" });
    expect(applicationTarget("/ws/applications/app")).toEqual({ workspace: "ws", name: "app", path: "/" });
    expect(applicationTarget("/ws/applications/app?q")).toEqual({ workspace: "ws", name: "app", path: "/?q" });
  });

  it("leaves every other path to the rest of the simulator", () => {
    for (const url of [
      "/v0/applications/app",
      "/ws/sandboxes/app/x",
      "/ws/applications",
      "/ws/applications/",
      "/sbx/ws/applications/x",
      "/_sim/applications/x",
      "/ws/applications/%E0%A4%A",
    ])
      expect(applicationTarget(url)).toBeUndefined();
  });
});

describe("the program an application runs", () => {
  it("is the platform's daemon when the image's entrypoint is sandbox-api (what ImageInstance.build adds), wherever it lives", () => {
    const of = (entrypoint: string[], cmd: string[] = []) => entrypointService({ entrypoint, cmd, env: [], workingDir: "" } as never)!;
    expect(runsSandboxApi(of(["/usr/local/bin/sandbox-api"]))).toBe(true);
    expect(runsSandboxApi(of(["sandbox-api"], ["--port", "8080"]))).toBe(true);
    expect(runsSandboxApi(of(["node", "server.js"]))).toBe(false);
    expect(runsSandboxApi(of(["/bin/sh", "-c", "sandbox-api & node server.js"]))).toBe(false);
    expect(runsSandboxApi(of(["/usr/local/bin/not-sandbox-api-really"]))).toBe(false);
  });

  it("runs on a machine named apart from every sandbox (sandbox names have no '.'), by which its image's progress finds it", () => {
    expect(applicationOfLaunch("web.app")).toBe("web");
    expect(applicationOfLaunch("web")).toBeUndefined();
    expect(applicationOfLaunch("web-app")).toBeUndefined();
  });

  it("listens on the revision's port, else the spec's, else 8080 (ApplicationSpec.port's default)", () => {
    const doc = (port?: number) => ({ metadata: { name: "a" }, spec: port === undefined ? {} : { port } }) as never;
    expect(applicationPort(doc())).toBe(DEFAULT_APPLICATION_PORT);
    expect(DEFAULT_APPLICATION_PORT).toBe(8080);
    expect(applicationPort(doc(3000))).toBe(3000);
    expect(applicationPort(doc(3000), { port: 9000 })).toBe(9000);
  });
});

describe("applications without a runtime (records only)", () => {
  it("follow their simulated plan to DEPLOYED on the clock, as before", async () => {
    const sim = startTestSim();
    try {
      expect(sim.deps.applications.runs).toBe(false);
      const created = await sim.api.post("/v0/applications", { metadata: { name: "rec-app" }, spec: { image: "sandbox/x:latest" } });
      expect(created.status).toBe(200);
      expect(created.body.status).toBe("UPLOADING");
      sim.base.advance(5_000);
      expect((await sim.api.get("/v0/applications/rec-app")).body.status).toBe("DEPLOYED");
    } finally {
      sim.close();
    }
  });
});
