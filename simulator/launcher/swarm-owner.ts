import { execFileSync } from "node:child_process";
import { hostname } from "node:os";
import { isAlive, startTimeOf } from "./proc.js";

/**
 * Which swarm services are this simulator's: each carries an owner label naming its process (host, pid, start
 * time), so a later simulator can tell services a killed one left behind; and the services of this process still
 * up, removed on the way out of a forced exit.
 */

/**
 * Services of this process not yet removed (every launcher's): a forced exit (a shutdown past its deadline, a
 * second signal) removes them synchronously on the way out, as other launchers' agents die with the simulator.
 * Only kill -9 skips this; the next start reaps those by their owner label.
 */
export const liveServices = new Map<string, { cli: string; host?: string }>(); // service -> docker CLI and its DOCKER_HOST
let exitHooked = false;
export function trackService(docker: string, service: string, host?: string): void {
  liveServices.set(service, { cli: docker, host });
  if (exitHooked) return;
  exitHooked = true;
  process.once("exit", () => {
    const byCli = new Map<string, { cli: string; host?: string; names: string[] }>();
    for (const [name, { cli, host }] of liveServices) {
      const key = `${cli}\0${host ?? ""}`;
      byCli.set(key, { cli, host, names: [...(byCli.get(key)?.names ?? []), name] });
    }
    for (const { cli, host, names } of byCli.values()) {
      try {
        const env = host ? { ...process.env, DOCKER_HOST: host } : process.env;
        execFileSync(cli, ["service", "rm", ...names], { stdio: "ignore", timeout: 10_000, env });
      } catch {
        // Some were gone already; the next start reaps whatever is left.
      }
    }
  });
}

/** This process as an owner label: `<hostname>/<pid>/<start time>`. */
export function ownerLabel(pid = process.pid): string {
  return `${hostname()}/${pid}/${startTimeOf(pid) ?? "?"}`;
}

/** True when the owner label names a process of this host that no longer runs (a killed simulator). */
export function ownerGone(owner: string): boolean {
  const [host, pid, started] = owner.split("/");
  if (host !== hostname() || !/^\d+$/.test(pid ?? "")) return false; // another host's simulator reaps its own
  return !isAlive(Number(pid)) || startTimeOf(Number(pid)) !== started;
}
