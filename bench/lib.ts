import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { sdkEnv } from "../simulator/env-lines.js";

/** Peak resident set size of a process (VmHWM), in MiB. */
export function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

/** CPU time (user + system) a process has used, in ms. */
export function cpuTimeMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

export function fmt(n: number, digits = 1): string {
  return n.toFixed(digits);
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export interface Listening {
  url: string;
  child: ChildProcess;
  /** SIGTERM, resolved once the process has exited. */
  stop(): Promise<void>;
}

/**
 * Runs `node <args>` and resolves once its stdout prints "listening on <url>"
 * (what the agent, the simulator and the benches' bare servers print).
 * `stdin` is written to the child and closed.
 */
export async function spawnListening(args: string[], stdin = ""): Promise<Listening> {
  const child = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "inherit"] });
  child.stdin!.end(stdin);
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    const onData = (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) {
        child.stdout!.off("data", onData).resume(); // keep draining, or a chatty child blocks on a full pipe
        resolve(m[1]);
      }
    };
    child.stdout!.on("data", onData);
    child.on("exit", (code) => reject(new Error(`${args.find((a) => a.endsWith(".js")) ?? "server"} exited with ${code}`)));
  });
  return {
    url,
    child,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** Starts the built agent as a child process and resolves with its URL. */
export function startAgentProcess(args: string[]): Promise<Listening> {
  const main = fileURLToPath(new URL("../sandbox-agent/main.js", import.meta.url));
  return spawnListening([main, "--port", "0", "--log-level", "warn", ...args]);
}

/**
 * Points @blaxel/core in this process at a simulator with its admin key, in the default workspace: the variables
 * `sandbox-sim env` prints (simulator/env-lines.ts). Call before the SDK is first imported: it reads them once.
 */
export function pointSdkAt(url: string, apiKey: string): void {
  Object.assign(process.env, sdkEnv({ config: { workspace: "default" }, adminApiKey: apiKey }, url));
}
