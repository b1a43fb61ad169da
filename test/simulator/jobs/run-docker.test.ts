import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { DockerLauncher } from "../../../simulator/launcher/index.js";
import { ensureDockerDaemon, ensureLocalBaseImage } from "../../helpers/docker.js";

/**
 * A job's tasks run in the job's image through an isolating launcher (docker,
 * where a daemon answers): the command sees the image's files, not the host's.
 */
// A daemon started here if need be, and an image built locally: no registry is reachable, so a registry image
// such as debian:bookworm-slim is on no fresh machine.
const unavailable = await ensureDockerDaemon();
let image = process.env.SANDBOX_KIT_DOCKER_TEST_IMAGE ?? "";

describe.skipIf(unavailable !== undefined)(`job tasks in containers${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let sim: ServedSimulator;
  beforeAll(async () => {
    image ||= await ensureLocalBaseImage();
  }, 1_200_000);
  afterAll(async () => {
    await sim?.stop();
  });

  it("each task runs the job's command in a container of the job's image, with its own index", async () => {
    sim = await serveSimulator(
      { port: 0, apiKey: "jobs-docker-key", workspace: "jobsdocker", logLevel: "silent" },
      { launcher: new DockerLauncher({ image, readyTimeoutMs: 180_000 }) },
    );
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${sim.url}/v0${path}`, {
        method,
        headers: { authorization: "Bearer jobs-docker-key", "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return (await res.json()) as Record<string, unknown>;
    };
    await call("POST", "/jobs", {
      metadata: { name: "in-image" },
      spec: { runtime: { image, command: `. /etc/os-release; echo "$ID task $TASK_INDEX"; test -e /run/sandbox-agent` } },
    });
    const { executionId } = await call("POST", "/jobs/in-image/executions", { tasks: [{}, {}] });
    let execution: { status?: string; tasks?: { result?: { stdout: string } }[] } = {};
    for (let i = 0; i < 1200 && !["succeeded", "failed", "cancelled", "timeout"].includes(execution.status ?? ""); i++) {
      await new Promise((r) => setTimeout(r, 100));
      execution = (await call("GET", `/jobs/in-image/executions/${executionId as string}`)) as typeof execution;
    }
    expect(execution.status).toBe("succeeded");
    expect(execution.tasks!.map((t) => t.result!.stdout)).toEqual(["debian task 0\n", "debian task 1\n"]);
  }, 300_000);
});
