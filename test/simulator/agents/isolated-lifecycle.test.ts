import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { eventually, tempBase } from "../launcher/helpers.js";
import { isolationUnavailable, listensOn, pidNamespaceOf, pidsInNamespace, pidsWithMarker, serverCommand } from "../../helpers/sandbox-procs.js";
import { spawnSimulatorProcess } from "../../helpers/simulator.js";

/**
 * A sandbox's processes live and die with it, under the default (isolating)
 * launcher: after delete, archive, deactivate, a restart for new envs,
 * sim.stop(), and SIGINT, SIGTERM or kill -9 of a simulator process, no
 * process it started is left — checked by host pid, for a real `sleep` and a
 * real server holding port 3000, and for everything in its PID namespace.
 */
const KEY = "isolated-lifecycle-key-01";
let counter = 0;

type Call = (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>;
function caller(base: string): Call {
  return async (method, path, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": "default", "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}

interface Workload {
  markers: string[];
  namespace: string;
}

/** Starts a sleep and a server on port 3000 in the sandbox (through the proxy's /process, as the SDK does) and finds them on the host. */
async function startWorkload(call: Call, sandbox: string): Promise<Workload> {
  const id = `${process.pid}${++counter}`;
  const sleepMarker = `86400.${id}`;
  const serverMarker = `server-marker-${id}`;
  for (const command of [`sleep ${sleepMarker}`, serverCommand(3000, serverMarker)]) {
    const res = await call("POST", `/sbx/default/${sandbox}/process`, { command, waitForCompletion: false });
    expect(res.status).toBe(200);
  }
  await eventually(() => pidsWithMarker(sleepMarker).length > 0 && pidsWithMarker(serverMarker).length > 0);
  // The server really holds port 3000, in the sandbox's own network namespace.
  await eventually(() => pidsWithMarker(serverMarker).some((pid) => listensOn(pid, 3000)));
  const namespace = pidNamespaceOf(pidsWithMarker(sleepMarker)[0]!)!;
  expect(namespace).not.toBe(pidNamespaceOf(process.pid));
  expect(pidsInNamespace(namespace).length).toBeGreaterThanOrEqual(3);
  return { markers: [sleepMarker, serverMarker], namespace };
}

async function expectGone(w: Workload): Promise<void> {
  await eventually(() => w.markers.every((m) => pidsWithMarker(m).length === 0) && pidsInNamespace(w.namespace).length === 0, 15_000);
}

describe.skipIf(isolationUnavailable !== undefined)("isolated sandboxes' processes live and die with them", () => {
  let sim: ServedSimulator;
  let call: Call;
  beforeAll(async () => {
    sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, logLevel: "silent", sandboxRetentionMs: 0 });
    call = caller(sim.url);
  });
  afterAll(async () => {
    await sim?.stop();
  });

  it("the simulator's default launcher isolates, and says so in /health", async () => {
    const health = await (await fetch(`${sim.url}/health`)).json();
    expect(health.sandboxes).toMatchObject({ launcher: "bwrap", isolated: true });
  });

  it("delete", async () => {
    expect((await call("POST", "/v0/sandboxes", { metadata: { name: "doomed" } })).status).toBe(200);
    const w = await startWorkload(call, "doomed");
    expect((await call("DELETE", "/v0/sandboxes/doomed")).status).toBe(200);
    await expectGone(w);
  });

  it("archive", async () => {
    expect((await call("POST", "/v0/sandboxes", { metadata: { name: "shelf" } })).status).toBe(200);
    const w = await startWorkload(call, "shelf");
    expect((await call("POST", "/v0/sandboxes/shelf/archive")).body.status).toBe("ARCHIVED");
    await expectGone(w);
  });

  it("deactivate (spec.enabled false)", async () => {
    const created = await call("POST", "/v0/sandboxes", { metadata: { name: "nap" } });
    const w = await startWorkload(call, "nap");
    const off = await call("PUT", "/v0/sandboxes/nap", { ...created.body, spec: { ...created.body.spec, enabled: false } });
    expect(off.body.status).toBe("DEACTIVATED");
    await expectGone(w);
  });

  it("a restart for new envs", async () => {
    const created = await call("POST", "/v0/sandboxes", { metadata: { name: "envs" }, spec: { runtime: { envs: [{ name: "A", value: "1" }] } } });
    const w = await startWorkload(call, "envs");
    const spec = { ...created.body.spec, runtime: { ...created.body.spec.runtime, envs: [{ name: "A", value: "2" }] } };
    expect((await call("PUT", "/v0/sandboxes/envs", { spec })).body.status).toBe("DEPLOYED");
    await expectGone(w);
  });

  it("sim.stop()", async () => {
    const own = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, logLevel: "silent" });
    try {
      const ownCall = caller(own.url);
      expect((await ownCall("POST", "/v0/sandboxes", { metadata: { name: "stopped-with-sim" } })).status).toBe(200);
      const w = await startWorkload(ownCall, "stopped-with-sim");
      await own.stop();
      await expectGone(w);
    } finally {
      await own.stop();
    }
  });
});

describe.skipIf(isolationUnavailable !== undefined)("a simulator process that ends takes its sandboxes' processes with it", () => {
  const running: ChildProcess[] = [];
  afterAll(() => {
    for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });

  async function startSimulatorProcess(): Promise<{ child: ChildProcess; url: string }> {
    const data = join(tempBase("sim-proc-"), "sim.db");
    return spawnSimulatorProcess(["--api-key", KEY, "--data", data, "--log-level", "warn", "--image-source", "host"], { track: running });
  }

  for (const sig of ["SIGINT", "SIGTERM", "SIGKILL"] as const) {
    it(`${sig} of the simulator`, async () => {
      const { child, url } = await startSimulatorProcess();
      const call = caller(url);
      expect((await call("POST", "/v0/sandboxes", { metadata: { name: `sig-${sig.toLowerCase()}` } })).status).toBe(200);
      const w = await startWorkload(call, `sig-${sig.toLowerCase()}`);
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill(sig);
      await exited;
      await expectGone(w);
    });
  }
});
