import { createServer } from "node:net";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startImageServices } from "../../../simulator/images/sandbox-images.js";
import type { ImageService } from "../../../simulator/images/recipes.js";
import { agentFetch, type AgentEndpoint } from "../../../simulator/launcher/endpoint.js";
import { BwrapLauncher, DockerLauncher, ProcessLauncher, type AgentHandle, type Launcher, type LaunchSpec } from "../../../simulator/launcher/index.js";
import { createLogger } from "../../../src/logging.js";
import { ensureDockerDaemon, ensureLocalBaseImage } from "../../helpers/docker.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { isAlive, specFor, tempBase } from "../launcher/helpers.js";

/**
 * An image's services (what a hub image's entrypoint starts with POST
 * /process) start through the agent's own endpoint under every launcher: a
 * loopback TCP port (process, docker) or the Unix socket the isolating
 * launcher binds out of the sandbox (the default, where a fetch to the
 * nominal URL failed). A service with ports to wait for is serving them when
 * the start returns; one already running (an agent that restarted and
 * adopted it) is left alone; one that cannot start is reported, not thrown.
 */

const dockerUnavailable = await ensureDockerDaemon();

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function capturedWarnings(): { logger: ReturnType<typeof createLogger>; lines: () => { service?: string; err?: string; msg?: string }[] } {
  let text = "";
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  const logger = createLogger({ level: "warn", destination, format: "json" });
  return {
    logger,
    lines: () =>
      text
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { service?: string; err?: string; msg?: string }),
  };
}

async function processOf(
  endpoint: AgentEndpoint,
  token: string,
  name: string,
): Promise<{ status: string; pid: string; restartOnFailure: boolean; maxRestarts: number } | undefined> {
  const res = await agentFetch(endpoint, { path: `/process/${name}`, headers: { authorization: `Bearer ${token}` } });
  return res.status === 200 ? JSON.parse(res.text) : undefined;
}

const launchers: { name: string; skip?: string; make: () => Launcher; spec?: () => Promise<Partial<LaunchSpec>> }[] = [
  { name: "process", make: () => new ProcessLauncher() },
  { name: "bwrap (the default)", skip: isolationUnavailable, make: () => new BwrapLauncher({ network: "none" }) },
  {
    name: "docker",
    skip: dockerUnavailable,
    make: () => new DockerLauncher({ readyTimeoutMs: 180_000 }),
    spec: async () => ({ image: process.env.SANDBOX_KIT_DOCKER_TEST_IMAGE ?? (await ensureLocalBaseImage()) }),
  },
];

for (const { name, skip, make, spec: extra } of launchers) {
  describe.skipIf(skip !== undefined)(`an image's services under the ${name} launcher${skip ? ` (skipped: ${skip})` : ""}`, () => {
    let launcher: Launcher;
    let handle: AgentHandle | undefined;
    let spec: LaunchSpec;
    beforeAll(async () => {
      launcher = make();
      spec = specFor(tempBase("image-services-"), "svc", (await extra?.()) ?? {});
      handle = await launcher.start(spec);
    }, 1_200_000);
    afterAll(async () => {
      await handle?.stop(2_000);
      await launcher?.close?.();
    });

    it("start through the agent's endpoint, wait for their ports, are left alone when running, and a failure is reported", async () => {
      const endpoint: AgentEndpoint = { url: handle!.url, socketPath: handle!.socketPath };
      const port = await freePort();
      const services: ImageService[] = [
        { name: "idle", command: "sleep 300", workingDir: "/" },
        { name: "web", command: `exec python3 -m http.server ${port} --bind 0.0.0.0`, workingDir: "/", waitForPorts: [port] },
        { name: "broken", command: "true", workingDir: "/no/such/dir" },
      ];
      const first = capturedWarnings();
      await startImageServices(endpoint, spec.token, services, first.logger);
      expect(await processOf(endpoint, spec.token, "idle")).toMatchObject({ status: "running", restartOnFailure: true, maxRestarts: 25 });
      // Served as soon as the start returns: no caller has to poll for it.
      const served = await agentFetch(endpoint, { path: `/port/${port}/`, headers: { authorization: `Bearer ${spec.token}` } });
      expect(served.status).toBe(200);
      expect(first.lines()).toEqual([
        expect.objectContaining({ service: "broken", msg: "could not start the image's service", err: expect.stringContaining("does not exist") }),
      ]);

      const pids = await Promise.all(["idle", "web"].map(async (n) => Number((await processOf(endpoint, spec.token, n))!.pid)));
      const again = capturedWarnings();
      await startImageServices(endpoint, spec.token, services.slice(0, 2), again.logger);
      expect(again.lines()).toEqual([]);
      expect(await Promise.all(["idle", "web"].map(async (n) => Number((await processOf(endpoint, spec.token, n))!.pid)))).toEqual(pids);

      for (const n of ["idle", "web"])
        await agentFetch(endpoint, { method: "DELETE", path: `/process/${n}/kill`, headers: { authorization: `Bearer ${spec.token}` } });
      // Pids are the agent's view: host pids under the process launcher, where nothing may outlive the test.
      if (name === "process") for (const pid of pids) expect(isAlive(pid)).toBe(false);
    }, 240_000);

    it("an agent that does not answer is reported with its reason, never thrown", async () => {
      const gone = capturedWarnings();
      await startImageServices({ url: "http://127.0.0.1:1" }, "t", [{ name: "x", command: "true", workingDir: "/" }], gone.logger);
      expect(gone.lines()).toEqual([expect.objectContaining({ service: "x", err: "ECONNREFUSED" })]);
    });
  });
}
