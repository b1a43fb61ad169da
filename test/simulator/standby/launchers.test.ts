import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator } from "../../../simulator/serve.js";
import { BwrapLauncher, DockerLauncher, ProcessLauncher, type AgentHandle } from "../../../simulator/launcher/index.js";
import { stopTree } from "../../../simulator/launcher/proc.js";
import { ensureDockerDaemon, ensureLocalBaseImage } from "../../helpers/docker.js";
import { isolationUnavailable, pidNamespaceOf, pidsInNamespace, pidsWithMarker } from "../../helpers/sandbox-procs.js";
import { agentFetch } from "../../../simulator/launcher/endpoint.js";
import { eventually, exec, specFor, tempBase } from "../launcher/helpers.js";

/**
 * Each launcher's freeze and thaw (standby), on real sandboxes: bwrap stops every process of the sandbox's
 * PID namespace from outside and lets them go on with the same pids; a stop while frozen drains (SIGTERM
 * reaches the agent) instead of waiting for SIGKILL; docker pauses the container; the process launcher cannot.
 */

function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

const ticksOf = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean).length : 0);

/** Starts `sh -c 'while :; ... >> /tmp/ticks'` through the agent without waiting for it. */
async function startTicker(handle: AgentHandle, token: string, marker: string): Promise<void> {
  const res = await agentFetch(handle, {
    method: "POST",
    path: "/process",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ command: `sh -c 'while :; do echo tick >> /tmp/ticks; sleep 0.1; done' ${marker}`, waitForCompletion: false }),
  });
  expect(res.status).toBe(200);
}

describe("the process launcher", () => {
  it("says it cannot put sandboxes in standby, and its handles have no freeze", async () => {
    const launcher = new ProcessLauncher();
    expect(launcher.standby).toMatch(/cannot|never/);
    const spec = specFor(tempBase("standby-process-"), "plain");
    const handle = await launcher.start(spec);
    try {
      expect(handle.freeze).toBeUndefined();
      expect(handle.thaw).toBeUndefined();
    } finally {
      await handle.stop(2_000);
    }
  });

  it("a simulator on it says so (/health, the hook's 409) and its idle sandboxes stay RUNNING", async () => {
    const key = "standby-process-admin-key";
    const sim = await serveSimulator({ port: 0, apiKey: key, testHooks: true, logLevel: "silent", standbyAfterMs: 300 }, { launcher: "process" });
    try {
      const call = (method: string, path: string, body?: unknown) =>
        fetch(`${sim.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, "x-blaxel-workspace": "default", "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      const health = (await (await call("GET", "/health")).json()) as { sandboxes: { standby: { unavailable?: string } } };
      expect(health.sandboxes.standby.unavailable).toMatch(/process launcher/);
      expect((await call("POST", "/v0/sandboxes", { metadata: { name: "awake" } })).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(((await (await call("GET", "/v0/sandboxes/awake")).json()) as { state: string }).state).toBe("RUNNING");
      const forced = await call("POST", "/_sim/standby", { sandbox: "awake", state: "STANDBY" });
      expect(forced.status).toBe(409);
      expect(((await forced.json()) as { message: string }).message).toMatch(/process launcher/);
    } finally {
      await sim.stop();
    }
  });
});

describe.skipIf(isolationUnavailable !== undefined)("the bwrap launcher's freeze and thaw", () => {
  const launcher = isolationUnavailable ? undefined : new BwrapLauncher({ network: "none" });
  const base = tempBase("standby-bwrap-");

  it("stops every process of the sandbox in place, and thaw lets them go on with the same pids", async () => {
    expect(launcher!.standby).toBe(true);
    const spec = specFor(base, "frozen");
    const handle = await launcher!.start(spec);
    try {
      const marker = `bwrap-ticker-${process.pid}`;
      await startTicker(handle, spec.token, marker);
      await eventually(() => pidsWithMarker(marker).length > 0);
      const pid = Math.min(...pidsWithMarker(marker)); // the ticker itself (a child it forks shows its marker for an instant)
      const namespace = pidNamespaceOf(pid)!;
      const ticks = join(spec.rootDir, "tmp", "ticks");
      await eventually(() => ticksOf(ticks) >= 2);

      await handle.freeze!();
      const members = pidsInNamespace(namespace);
      expect(members).toContain(handle.sandboxPid);
      expect(members.every((p) => procState(p) === "T")).toBe(true);
      // The agent's host-side chain (bwrap outside the namespace) is not stopped: the simulator can still reach it.
      expect(procState(handle.pid!)).not.toBe("T");
      const frozenAt = ticksOf(ticks);
      const frozenPids = pidsWithMarker(marker).sort();
      expect(frozenPids).toContain(pid);
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(ticksOf(ticks)).toBe(frozenAt);

      await handle.thaw!();
      // The ticker goes on as the same process. (Not the exact set: the shell forks its next `sleep` at once, and a
      // child between fork and exec shows the shell's command line, marker included, for an instant.)
      expect(pidsWithMarker(marker)).toContain(pid);
      await eventually(() => ticksOf(ticks) > frozenAt + 1);
      expect((await exec(handle, spec.token, "echo awake")).stdout.trim()).toBe("awake");
    } finally {
      await handle.stop(2_000);
    }
  });

  it("a stop while frozen thaws first: the agent takes SIGTERM and exits by itself, no SIGKILL after the grace", async () => {
    const spec = specFor(base, "stopped-frozen");
    const handle = await launcher!.start(spec);
    const namespace = pidNamespaceOf(handle.sandboxPid!)!;
    await handle.freeze!();
    const exit = await handle.stop(30_000);
    expect(exit.signal).not.toBe("SIGKILL");
    await eventually(() => pidsInNamespace(namespace).length === 0);
  });

  it("stopTree finds a process forked while it stops the tree", async () => {
    const spec = specFor(base, "forking");
    const handle = await launcher!.start(spec);
    try {
      const marker = `forker-${process.pid}`;
      // A shell forking a short-lived child ten times a second: whatever is alive when stopTree ends is stopped.
      const res = await agentFetch(handle, {
        method: "POST",
        path: "/process",
        headers: { authorization: `Bearer ${spec.token}`, "content-type": "application/json" },
        body: JSON.stringify({ command: `sh -c 'while :; do sleep 0.05 & wait; done' ${marker}`, waitForCompletion: false }),
      });
      expect(res.status).toBe(200);
      await eventually(() => pidsWithMarker(marker).length > 0);
      const stopped = await stopTree(handle.sandboxPid!);
      const namespace = pidNamespaceOf(handle.sandboxPid!)!;
      for (const p of pidsInNamespace(namespace)) expect(["T", "Z"]).toContain(procState(p));
      expect(stopped.length).toBeGreaterThanOrEqual(3);
      await handle.thaw!();
    } finally {
      await handle.stop(2_000);
    }
  });
});

const dockerUnavailable = await ensureDockerDaemon();

describe.skipIf(dockerUnavailable !== undefined)(`the docker launcher's freeze and thaw${dockerUnavailable ? ` (skipped: ${dockerUnavailable})` : ""}`, () => {
  let image = "";
  beforeAll(async () => {
    image = process.env.SANDBOX_KIT_DOCKER_TEST_IMAGE ?? (await ensureLocalBaseImage());
  }, 1_200_000);
  const launcher = new DockerLauncher({ readyTimeoutMs: 180_000 });
  const handles: AgentHandle[] = [];
  afterAll(async () => {
    await Promise.all(handles.map((h) => h.stop(1_000)));
  });

  it("docker pause stops the container in place, unpause lets it go on; a stop while paused removes it", async () => {
    expect(launcher.standby).toBe(true);
    const base = tempBase("standby-docker-");
    const spec = specFor(base, "paused", { image });
    const handle = await launcher.start(spec);
    handles.push(handle);
    await startTicker(handle, spec.token, "docker-ticker");
    const ticks = join(spec.rootDir, "tmp", "ticks");
    const container = () =>
      execFileSync("docker", ["ps", "--all", "--quiet", "--filter", `label=sandbox-kit.data-dir=${spec.dataDir}`], { encoding: "utf8" }).trim();
    await handle.freeze!();
    expect(execFileSync("docker", ["inspect", "--format", "{{.State.Paused}}", container()], { encoding: "utf8" }).trim()).toBe("true");
    const frozenAt = ticksOf(ticks);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(ticksOf(ticks)).toBe(frozenAt);
    await handle.thaw!();
    expect((await exec(handle.url, spec.token, "echo awake")).stdout.trim()).toBe("awake");
    await handle.freeze!();
    await handle.stop(5_000);
    expect(container()).toBe("");
  }, 240_000);
});
