/**
 * The first sandbox on a new machine: from `npm start` (the built simulator,
 * default options) with empty caches — an empty image store, an empty npm
 * cache — to the output of the first command run in a default sandbox through
 * the real SDK (SandboxInstance.create, then process.exec). Beside it, as the
 * baseline of the same run: the same path with the image now in the store.
 * Also where the cold build's time went (the phases the simulator logged) and
 * the simulator's peak RSS.
 *
 * A cold build downloads about 90 MB from Debian's mirror and npm's registry:
 * run by `npm run bench:first-sandbox`, or by bench:e2e with BENCH_E2E_COLD=1.
 * The host's apt archives (/var/cache/apt/archives) are used as a running
 * simulator would; they only help where the host runs the image's Debian release.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { fmt, peakRssMiB } from "./lib.js";

const SIM = fileURLToPath(new URL("../simulator/main.js", import.meta.url));
const KEY = "bench-first-sandbox-key";

interface Run {
  /** npm start to the first command's output, seconds. */
  total: number;
  /** The start-up build as /health last reported it. */
  buildSeconds?: number;
  /** Seconds from start at which each phase of the build was logged. */
  phases: { at: number; text: string }[];
  peakRss: number;
}

/** A free port, the same for both runs: @blaxel/core reads BL_API_URL once per process. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  await new Promise((r) => server.close(r));
  return port;
}

async function firstSandbox(base: string, label: string, port: number): Promise<Run> {
  const envFile = join(base, `${label}.env`);
  const env = { ...process.env, HOME: join(base, "home"), XDG_CACHE_HOME: join(base, "cache"), npm_config_cache: "", LOG_FORMAT: "json" };
  const started = performance.now();
  const child = spawn(process.execPath, [SIM, "--port", String(port), "--api-key", KEY, "--write-env", envFile, "--sandbox-retention", "0"], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const phases: Run["phases"] = [];
  let peakRss = 0;
  const sample = setInterval(() => (peakRss = Math.max(peakRss, peakRssMiB(child.pid!))), 500);
  try {
    const url = await listening(child, (line) => {
      try {
        const entry = JSON.parse(line) as { msg?: string; build?: string };
        if (entry.msg === "default image" && entry.build) phases.push({ at: (performance.now() - started) / 1000, text: entry.build });
      } catch {
        // Not a log line.
      }
    });
    for (const line of readFileSync(envFile, "utf8").split("\n")) {
      const eq = line.indexOf("=");
      if (eq > 0) process.env[line.slice(0, eq)] = line.slice(eq + 1);
    }
    delete process.env.BL_CLIENT_CREDENTIALS;
    const { SandboxInstance } = await import("@blaxel/core");
    const sandbox = await SandboxInstance.create({ name: `first-${label}` });
    const out = await sandbox.process.exec({ command: "echo first output from $(node --version)", waitForCompletion: true });
    if (!String(out.logs ?? out.stdout ?? "").includes("first output")) throw new Error(`unexpected output: ${JSON.stringify(out).slice(0, 300)}`);
    const total = (performance.now() - started) / 1000;
    const health = (await (await fetch(`${url}/health`)).json()) as { defaultImage?: { seconds: number } };
    peakRss = Math.max(peakRss, peakRssMiB(child.pid!));
    await SandboxInstance.delete(`first-${label}`);
    return { total, buildSeconds: health.defaultImage?.seconds, phases, peakRss };
  } finally {
    clearInterval(sample);
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  }
}

function listening(child: ChildProcess, onLog: (line: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const match = /sandbox-sim listening on (\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    let err = "";
    child.stderr!.setEncoding("utf8").on("data", (d: string) => {
      err += d;
      const lines = err.split("\n");
      err = lines.pop()!;
      lines.forEach(onLog);
    });
    child.once("exit", (code) => reject(new Error(`simulator exited with ${code}`)));
  });
}

/** The phases worth a figure: mmdebstrap's steps (with its own clock), npm, done. */
function phaseLine(phases: Run["phases"]): string {
  const keys = [
    /running apt-get update/,
    /downloading packages/,
    /extracting archives/,
    /installing essential/,
    /installing remaining/,
    /success in/,
    /installing npm/,
    /^done$/,
  ];
  const names = ["update", "download", "extract", "essential", "remaining", "mmdebstrap done", "npm", "image done"];
  return keys
    .map((k, i) => {
      const hit = phases.find((p) => k.test(p.text));
      return hit ? `${names[i]} @${fmt(hit.at)} s` : undefined;
    })
    .filter(Boolean)
    .join(" | ");
}

export async function benchFirstSandbox(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "bench-first-sandbox-"));
  try {
    mkdirSync(join(base, "home"));
    const port = await freePort();
    const cold = await firstSandbox(base, "cold", port);
    const warm = await firstSandbox(base, "warm", port);
    console.log(
      `first sandbox  npm start -> first command's output, empty caches ${fmt(cold.total)} s (target <= 60 s on an idle machine; start-up build ${fmt(cold.buildSeconds ?? 0)} s) | baseline: image in the store ${fmt(warm.total)} s | ratio ${fmt(cold.total / warm.total)} | simulator peak RSS ${fmt(cold.peakRss)} MiB | load average ${loadavg()
        .map((n) => fmt(n, 2))
        .join(" ")}`,
    );
    console.log(`cold build     ${phaseLine(cold.phases)}`);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  benchFirstSandbox().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
