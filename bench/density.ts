/**
 * bench:density — idle memory per sandbox, and how many fit: a simulator (default launcher, host root) per agent
 * mode, N sandboxes created and left idle, the machine's MemAvailable drop divided by N; then every one answers a
 * file read and a command, and all are deleted. Both agent modes in one run, their ratio printed last.
 *
 *   npm run bench:density [-- --n 200] [--host-n 500] [--agent-modes host,process]
 *
 * No assertion: a bench reports. The machine is shared: the drop is taken after a settle, beside the simulator's
 * own RSS and the one before any sandbox existed.
 */
import { readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { fmt, spawnListening, type Listening } from "./lib.js";

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1]!;
};
const N = Number(arg("n", "200"));
const HOST_N = Number(arg("host-n", String(N)));
const MODES = arg("agent-modes", "host,process").split(",") as ("host" | "process")[];
const KEY = "bench-density-admin-key";

function memAvailableMiB(): number {
  return Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))![1]) / 1024;
}
function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
}
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call(sim: Listening, method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, connection: "close", ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(120_000),
  });
  return { status: res.status, text: await res.text() };
}

async function measure(mode: "host" | "process", n: number): Promise<{ perSandbox: number; answered: number; createS: number }> {
  const simMain = fileURLToPath(new URL("../simulator/main.js", import.meta.url));
  const sim = await spawnListening([
    simMain,
    "--port",
    "0",
    "--api-key",
    KEY,
    "--log-level",
    "warn",
    "--agent-mode",
    mode,
    "--image-source",
    "host",
    "--standby-after",
    "0",
  ]);
  try {
    await settle(3_000);
    const mem0 = memAvailableMiB();
    const rss0 = rssMiB(sim.child.pid!);
    const names = Array.from({ length: n }, (_, i) => `dense-${i}`);
    const t0 = performance.now();
    for (let i = 0; i < n; i += 20) {
      const batch = await Promise.all(names.slice(i, i + 20).map((name) => call(sim, "POST", "/v0/sandboxes", { metadata: { name } })));
      const failed = batch.find((r) => r.status !== 200);
      if (failed) throw new Error(`a create failed in ${mode} mode: ${failed.status} ${failed.text.slice(0, 200)}`);
    }
    const createS = (performance.now() - t0) / 1000;
    await settle(5_000);
    const perSandbox = (mem0 - memAvailableMiB()) / n;
    const simRss = rssMiB(sim.child.pid!) - rss0;
    let answered = 0;
    for (let i = 0; i < n; i += 50) {
      const rounds = await Promise.all(
        names.slice(i, i + 50).map(async (name) => {
          const file = await call(sim, "GET", `/sbx/default/${name}/filesystem/tmp`);
          const cmd = await call(sim, "POST", `/sbx/default/${name}/process`, { command: "echo ok", waitForCompletion: true });
          return file.status === 200 && cmd.status === 200 && cmd.text.includes("ok");
        }),
      );
      answered += rounds.filter(Boolean).length;
    }
    console.log(
      `${mode.padEnd(7)} ${n} idle sandboxes | MemAvailable drop ${fmt(perSandbox, 2)} MiB per sandbox (the simulator's own RSS +${fmt(simRss / n, 2)} MiB of it) | ${answered}/${n} answered a file read and a command | created in ${fmt(createS, 1)} s`,
    );
    for (let i = 0; i < n; i += 50) await Promise.all(names.slice(i, i + 50).map((name) => call(sim, "DELETE", `/v0/sandboxes/${name}`)));
    return { perSandbox, answered, createS };
  } finally {
    await sim.stop();
  }
}

async function main(): Promise<void> {
  console.log(
    `bench:density  ${cpus().length} CPUs, load average ${loadavg()
      .map((l) => fmt(l, 2))
      .join(" ")}, MemAvailable ${fmt(memAvailableMiB(), 0)} MiB`,
  );
  const results: Record<string, { perSandbox: number }> = {};
  for (const mode of MODES) results[mode] = await measure(mode, mode === "host" ? HOST_N : N);
  if (results.host && results.process)
    console.log(`ratio      idle memory per sandbox host/process: ${fmt(results.host.perSandbox / results.process.perSandbox, 3)}`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
