import { spawn } from "node:child_process";
import type { Readable } from "node:stream";
import { LaunchError } from "./types.js";

/**
 * Outbound network for a sandbox's own network namespace: slirp4netns (a
 * user-mode TCP/IP stack, Debian's `slirp4netns`) attached to the sandbox's
 * first process gives it a tap0 with 10.0.2.100/24, a gateway and a DNS
 * forwarder at 10.0.2.3. `--disable-host-loopback` keeps the host's loopback
 * (the simulator, other sandboxes' previews, local databases) out of reach.
 * The slirp process ends with the simulator even on kill -9: its exit fd is
 * one end of a socket pair the simulator holds.
 */

/** The resolver inside: slirp4netns's DNS forwarder (the host's resolv.conf may name a loopback address unreachable from the sandbox). */
export const SANDBOX_RESOLV_CONF = "nameserver 10.0.2.3\noptions edns0\n";

export interface OutboundLink {
  /** Resolves once tap0 is configured (slirp4netns's ready fd). */
  ready: Promise<void>;
  /** Ends slirp4netns (its tap0 goes with it); resolves once it has exited. */
  stop(): Promise<void>;
}

export function startOutbound(slirp4netns: string, sandboxPid: number): OutboundLink {
  const child = spawn(slirp4netns, ["--configure", "--mtu=65520", "--disable-host-loopback", "--exit-fd=3", "--ready-fd=4", String(sandboxPid), "tap0"], {
    stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-2048)));
  child.on("error", () => {});
  const ready = new Promise<void>((resolve, reject) => {
    (child.stdio[4] as Readable).once("data", () => resolve());
    child.once("exit", (code, signal) =>
      reject(new LaunchError(`slirp4netns exited before the sandbox's network was up (code ${code}, signal ${signal}): ${stderr.trim()}`)),
    );
    child.once("error", (err) => reject(new LaunchError(`cannot start slirp4netns: ${err.message}`)));
  });
  ready.catch(() => {}); // awaited by the launcher; an early failure must not be an unhandled rejection
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    ready,
    stop: () => {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
      child.kill("SIGKILL");
      return exited;
    },
  };
}

/**
 * A sandbox's direct outbound path while it runs: attached once its namespace
 * is set up (`attach`, when enabled), then detached or attached again in
 * order (`set`): a sandbox whose policy restricts destinations has none, so
 * its egress proxy is its only way out (simulator/egress). Ends with `stop`.
 */
export class DirectOutbound {
  private link: OutboundLink | undefined;
  private up: Promise<void> | undefined;
  private changing = Promise.resolve();

  constructor(
    private readonly slirp4netns: string | undefined,
    private readonly sandboxPid: Promise<number>,
    private enabled: boolean,
    private readonly alive: () => boolean,
  ) {}

  /** The first attachment (once: later calls return the same promise); nothing without slirp4netns or while disabled. */
  attach(): Promise<void> {
    return (this.up ??= (async () => {
      const pid = await this.sandboxPid;
      if (!this.slirp4netns || !this.enabled) return;
      this.link = startOutbound(this.slirp4netns, pid);
      await this.link.ready;
    })());
  }

  set(on: boolean): Promise<void> {
    return (this.changing = this.changing.then(async () => {
      this.enabled = on;
      if (!this.slirp4netns || !this.up) return;
      await this.up.catch(() => {});
      if (!on && this.link) {
        const old = this.link;
        this.link = undefined;
        await old.stop();
      } else if (on && !this.link && this.alive()) {
        this.link = startOutbound(this.slirp4netns, await this.sandboxPid);
        await this.link.ready;
      }
    }));
  }

  stop(): void {
    void this.link?.stop();
  }
}
