import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { agentHostSupport } from "../../../simulator/agent-host/host.js";
import { isolationUnavailable, pidsWithMarker } from "../../helpers/sandbox-procs.js";
import { spawnSimulatorProcess } from "../../helpers/simulator.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { eventually, isAlive } from "../launcher/helpers.js";

/**
 * A sandbox that works against the agent host, by pid and by the host's own files: a process in it flips a path
 * between a directory and links to `/` and `/proc/self/root` while the API reads, writes, lists, uploads parts to
 * and deletes through it thousands of times (nothing of the host is read or changed); a flood of requests and a
 * never-read log stream in one sandbox leave another answering; a kill -9 of the simulator leaves no sandbox process.
 */
const support = agentHostSupport();
const SKIP = isolationUnavailable ?? (support.available ? undefined : support.reason);
if (SKIP) console.warn(`[agent host hostile tests] SKIPPING: ${SKIP}`);

const KEY = "agent-host-hostile-key";
const WS = "hostile";
let sim: ServedSimulator;

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, connection: "close", ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}
const agent = (name: string, method: string, path: string, body?: unknown) => call(method, `/sbx/${WS}/${name}${path}`, body);

/** A part put into an upload whose target is behind the flipping path, and the upload completed: the bodies. */
async function uploadThrough(upload: string): Promise<string[]> {
  const part = await fetch(`${sim.url}/sbx/${WS}/flipper/filesystem-multipart/${upload}/part?partNumber=1`, {
    method: "PUT",
    headers: { authorization: `Bearer ${KEY}`, connection: "close", "content-type": "application/octet-stream" },
    body: "uploaded through the flip",
  });
  const etag = /"etag":"([^"]+)"/.exec(await part.text())?.[1];
  const done = await agent("flipper", "POST", `/filesystem-multipart/${upload}/complete`, { parts: [{ partNumber: 1, etag }] });
  return [String(part.status), done.text];
}

/** What a watch streams in ~150 ms while `act` runs on the host 50 ms in. */
async function watchWhile(path: string, act: () => void): Promise<string> {
  const abort = new AbortController();
  let text = "";
  const timer = setTimeout(act, 50);
  const stop = setTimeout(() => abort.abort(), 150);
  try {
    const res = await fetch(`${sim.url}/sbx/${WS}/flipper${path}`, { headers: { authorization: `Bearer ${KEY}` }, signal: abort.signal });
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString("utf8");
    }
  } catch {
    // aborted: what arrived is the answer
  } finally {
    clearTimeout(timer);
    clearTimeout(stop);
  }
  return text;
}

beforeAll(async () => {
  if (SKIP) return;
  sim = await serveSimulator({ port: 0, imageSource: "host", apiKey: KEY, workspace: WS, logLevel: "silent", standbyAfterMs: 0, agentMode: "host" });
});
afterAll(async () => {
  await sim?.stop();
});

describe.skipIf(SKIP !== undefined)(`the agent host against a hostile sandbox${SKIP ? ` [SKIPPED: ${SKIP}]` : ""}`, () => {
  it("a path flipped between a directory and links to / never leads the API outside the sandbox", async () => {
    // The host's secret: at the same path as the sandbox would name it through a link to "/".
    const secretDir = trackedTempDir("host-secret-");
    const secret = `HOST-SECRET-${process.pid}-${Date.now()}`;
    writeFileSync(join(secretDir, "secret.txt"), secret);
    writeFileSync(join(secretDir, "victim.txt"), "keep me");
    const before = readdirSync(secretDir).sort();
    expect((await call("POST", "/v0/sandboxes", { metadata: { name: "flipper" } })).status).toBe(200);
    const flip = `while :; do mkdir -p /tmp/flip; rmdir /tmp/flip; ln -s / /tmp/flip; rm -f /tmp/flip; ln -s /proc/self/root /tmp/flip; rm -f /tmp/flip; done`;
    expect((await agent("flipper", "POST", "/process", { command: flip, name: "flip" })).status).toBe(200);

    const through = `/tmp/flip${secretDir}`;
    const statuses = new Map<number, number>();
    const bodies: string[] = [];
    for (let round = 0; round < 100; round++) {
      const ops = [
        agent("flipper", "GET", `/filesystem${through}/secret.txt`),
        agent("flipper", "GET", `/filesystem${through}`),
        agent("flipper", "PUT", `/filesystem${through}/written.txt`, { content: "from the API" }),
        agent("flipper", "DELETE", `/filesystem${through}/victim.txt`),
        agent("flipper", "GET", `/filesystem-content-search/tmp/flip?query=HOST-SECRET`),
        agent("flipper", "POST", `/filesystem-multipart/initiate/${encodeURIComponent(`${through}/up.bin`)}`, { permissions: "0644" }),
        agent("flipper", "GET", `/filesystem/tmp/flip/proc/self/root${secretDir}/secret.txt`),
        agent("flipper", "GET", `/filesystem/tmp/flip/etc/hostname`),
        agent("flipper", "PUT", `/filesystem${through}/../../escape-${round}.txt`, { content: "x" }),
        agent("flipper", "GET", `/filesystem/tree/tmp/flip`),
      ];
      for (const r of await Promise.all(ops)) {
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        bodies.push(r.text);
        const upload = /"uploadId":"([^"]+)"/.exec(r.text)?.[1];
        if (upload) bodies.push(...(await uploadThrough(upload)));
      }
      // A watch through the flipping path while the host writes in the directory of the same name: no event of it.
      bodies.push(await watchWhile(`/watch/filesystem${through}`, () => writeFileSync(join(secretDir, `event-${round}.txt`), "host")));
    }
    for (const name of readdirSync(secretDir)) if (name.startsWith("event-")) unlinkSync(join(secretDir, name));
    expect(bodies.filter((b) => b.includes("event-"))).toEqual([]);
    expect([...statuses.values()].reduce((a, b) => a + b)).toBe(1000);
    expect([...statuses.keys()].every((s) => s < 500)).toBe(true);
    expect(bodies.filter((b) => b.includes(secret))).toEqual([]);
    expect(readdirSync(secretDir).sort()).toEqual(before);
    expect(readFileSync(join(secretDir, "victim.txt"), "utf8")).toBe("keep me");
    expect(readdirSync("/tmp").filter((n) => n.startsWith("escape-"))).toEqual([]);
    expect(readdirSync("/").filter((n) => n.startsWith("escape-"))).toEqual([]);
  }, 300_000);

  it("drives mounted through a flipping path land inside the sandbox's own namespace, never on the host", async () => {
    const hostDir = trackedTempDir("host-mount-target-");
    // (Other test files may mount on the host meanwhile, docker among them: only a mount of ours would name these.)
    const hostMounts = () =>
      readFileSync("/proc/self/mountinfo", "utf8")
        .split("\n")
        .filter((line) => line.includes(hostDir) || line.includes("/raced") || line.includes("/mflip"));
    expect((await call("POST", "/v0/drives", { metadata: { name: "raced" }, spec: {} })).status).toBeLessThan(300);
    expect((await call("POST", "/v0/sandboxes", { metadata: { name: "mounter" } })).status).toBe(200);
    const flip = `i=0; while :; do i=$((i+1)); mkdir -p /tmp/mflip; mv -T /tmp/mflip /tmp/moved-$i 2>/dev/null; ln -s / /tmp/mflip; rm -f /tmp/mflip; done`;
    expect((await agent("mounter", "POST", "/process", { command: flip, name: "mflip" })).status).toBe(200);
    const statuses: number[] = [];
    for (let round = 0; round < 60; round++) {
      const mountPath = `/tmp/mflip${hostDir}/d${round}`;
      const mounted = await agent("mounter", "POST", "/drives/mount", { driveName: "raced", mountPath });
      statuses.push(mounted.status);
      // (The path may lead elsewhere by now: a drive moved with its parent is unmounted below, where it is.)
      if (mounted.status === 200) await agent("mounter", "DELETE", `/drives/mount${mountPath}`);
    }
    await agent("mounter", "DELETE", "/process/mflip/kill");
    for (const left of JSON.parse((await agent("mounter", "GET", "/drives/mount")).text).mounts as { mountPath: string }[])
      expect((await agent("mounter", "DELETE", `/drives/mount${left.mountPath}`)).status).toBe(200);
    expect(
      statuses.every((s) => s < 500),
      JSON.stringify(statuses),
    ).toBe(true);
    // Whatever the path was at each moment, the host's mount table and the host directory of the same name are untouched.
    expect(hostMounts()).toEqual([]);
    expect(readdirSync(hostDir)).toEqual([]);
    // And the sandbox is left with no drive mounted and none recorded (`moved` ones unmounted where they went).
    expect(JSON.parse((await agent("mounter", "GET", "/drives/mount")).text)).toEqual({ mounts: [] });
  }, 300_000);

  it("a flood and a never-read log stream in one sandbox leave another answering; the flooded one answers or says 429", async () => {
    await call("POST", "/v0/sandboxes", { metadata: { name: "flooder" } });
    await call("POST", "/v0/sandboxes", { metadata: { name: "bystander" } });
    await agent("flooder", "POST", "/process", { command: "yes flood", name: "yes" });
    // A log stream nobody reads: the host must not buffer what `yes` writes for it.
    const stalled = await fetch(`${sim.url}/sbx/${WS}/flooder/process/yes/logs/stream`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(stalled.status).toBe(200);
    const rss0 = process.memoryUsage().rss;
    const flood = Promise.all(Array.from({ length: 1000 }, () => agent("flooder", "GET", "/filesystem/tmp")));
    const bystander: number[] = [];
    for (let i = 0; i < 50; i++) bystander.push((await agent("bystander", "GET", "/filesystem/tmp")).status);
    const flooded = await flood;
    expect(bystander).toEqual(bystander.map(() => 200));
    expect(flooded.every((r) => r.status === 200 || r.status === 429)).toBe(true);
    expect(flooded.filter((r) => r.status === 200).length).toBeGreaterThan(0);
    // Bounded: what `yes` wrote meanwhile (far more than this) is not held in the host's memory.
    expect(process.memoryUsage().rss - rss0).toBeLessThan(256 * 1024 * 1024);
    await stalled.body?.cancel();
    await agent("flooder", "DELETE", "/process/yes");
  }, 120_000);
});

describe.skipIf(SKIP !== undefined)("a kill -9 of a simulator whose host serves the sandboxes", () => {
  it("leaves no sandbox process alive (by pid)", async () => {
    const dir = trackedTempDir("host-kill-");
    mkdirSync(dir, { recursive: true });
    const track: import("node:child_process").ChildProcess[] = [];
    const { child, url } = await spawnSimulatorProcess(
      [
        "--image-source",
        "host",
        "--api-key",
        KEY,
        "--workspace",
        WS,
        "--agent-mode",
        "host",
        "--standby-after",
        "0",
        "--log-level",
        "silent",
        "--data",
        join(dir, "sim.db"),
      ],
      { track },
    );
    try {
      const markers: string[] = [];
      for (const name of ["k1", "k2", "k3"]) {
        const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
        expect((await fetch(`${url}/v0/sandboxes`, { method: "POST", headers, body: JSON.stringify({ metadata: { name } }) })).status).toBe(200);
        const marker = `86400.${process.pid}${markers.length}`;
        markers.push(marker);
        const started = await fetch(`${url}/sbx/${WS}/${name}/process`, { method: "POST", headers, body: JSON.stringify({ command: `sleep ${marker}` }) });
        expect([started.status, await started.text()]).toMatchObject([200, expect.any(String)]);
      }
      await eventually(() => markers.every((m) => pidsWithMarker(m).length >= 1)).catch((e: Error) => {
        throw new Error(
          `${e.message}: ${markers
            .map((m) =>
              pidsWithMarker(m)
                .map((p) => readFileSync(`/proc/${p}/cmdline`, "utf8"))
                .join("|"),
            )
            .join(" / ")}`,
        );
      });
      const pids = markers.flatMap((m) => pidsWithMarker(m));
      child.kill("SIGKILL");
      await eventually(() => pids.every((p) => !isAlive(p)), 15_000);
      expect(pids.filter((p) => isAlive(p))).toEqual([]);
      expect(existsSync(join(dir, "sim.db"))).toBe(true);
    } finally {
      for (const c of track) c.kill("SIGKILL");
    }
  }, 120_000);
});
