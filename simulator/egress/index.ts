import { isIP } from "node:net";
import type { Logger } from "../../src/logging.js";
import type { ResourceStore } from "../store/resources.js";
import type { SandboxEgressSpec } from "../launcher/gateway.js";
import { EGRESS_CA_TRUST_ENV, EGRESS_TRUST_ENV } from "../launcher/egress-trust.js";
import { EgressCa } from "./ca.js";
import { parseNetwork, restricts, usesProxy, type EgressPolicy } from "./policy.js";
import type { SimulatorHandler } from "./in-process.js";
import { EgressProxy, type EgressClient } from "./egress-proxy.js";

/**
 * The simulator's egress (docs/launchers.md, "Network"): one proxy for every
 * sandbox, reached inside each through its gateway on the simulator's own
 * address, so the URLs users get (sandbox URLs, previews, BL_API_URL) work
 * from inside as outside, and the sandbox's HTTP(S) traffic passes its
 * spec.network policy. Composition: serve.ts builds one and gives
 * SandboxAgents and the job runner `launchFor`.
 */

/** Always bypassed, as on the platform (@blaxel/core's ProxyConfig.bypass). */
const ALWAYS_BYPASSED = ["localhost", "127.0.0.1", "::1", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.169.254", ".local", ".internal"];

export interface SimulatorEgressOptions {
  /** Where the CA is kept (beside --data); undefined = made per run. */
  caDir?: string;
  logger: Logger;
  resources: ResourceStore;
  /** The simulator's public base URL (metadata.url, previews, BL_API_URL) and the address it listens on. */
  urls: () => { base: string; listen: string };
  /** False with --sandbox-network none: the simulator is reachable, nothing else. */
  outbound: boolean;
  /** The simulator's HTTP handler once it serves: requests for it are handed over in this process. */
  handler?: () => SimulatorHandler | undefined;
  /** Every workspace's name: host-form preview names of all of them lead to the simulator inside a sandbox. */
  workspaces?: () => string[];
}

/** How often the names in sandboxes' /etc/hosts are compared with the stored previews. */
const HOSTS_REFRESH_MS = 1_000;

export class SimulatorEgress {
  readonly proxy: EgressProxy;
  private madeCa: EgressCa | undefined;
  private readonly parsed = new Map<string, EgressPolicy | undefined>();
  /** Each sandbox's /etc/hosts writer and the names it last wrote. */
  private readonly hostWriters = new Map<(names: string[]) => void, string>();
  private hostsTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: SimulatorEgressOptions) {
    this.proxy = new EgressProxy({
      ca: { contextFor: (host) => this.ca.contextFor(host) },
      logger: options.logger,
      policyOf: (client) => this.policyOf(client),
      isSimulator: (host, port) => this.isSimulator(host, port),
      simulatorAddress: () => {
        const listen = new URL(options.urls().listen);
        const host = listen.hostname.replace(/^\[(.*)\]$/, "$1");
        return { host: host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host, port: Number(listen.port) || 80 };
      },
      simulatorHandler: options.handler,
      outbound: options.outbound,
    });
  }

  /** Made on first use (the first sandbox): a simulator that runs none never pays for its keys. */
  get ca(): EgressCa {
    return (this.madeCa ??= new EgressCa(this.options.caDir));
  }

  /**
   * The sandbox's gateway, CA and environment, for LaunchSpec.egress and env. Every sandbox trusts the proxy's CA
   * (EGRESS_CA_TRUST_ENV: the simulator's hosts answer https on its port, under that CA); only a sandbox with a
   * proxy configuration (usesProxy) gets the proxy's variables, as on the platform: HTTP_PROXY and HTTPS_PROXY
   * name it by an https:// URL (TLS to the proxy), NODE_EXTRA_CA_CERTS its CA. They are read at the sandbox's
   * start: a policy set later by an update applies to what reaches the proxy, not to the environment.
   */
  launchFor(client: EgressClient): { spec: SandboxEgressSpec; env: Record<string, string> } {
    const base = new URL(this.options.urls().base);
    const port = Number(base.port) || (base.protocol === "https:" ? 443 : 80);
    const proxyUrl = `https://127.0.0.1:${port}`;
    const policy = this.policyOf(client);
    const noProxy = [...ALWAYS_BYPASSED, ...(policy?.bypass ?? [])].join(",");
    const proxied = usesProxy(policy);
    return {
      spec: {
        listen: [
          { host: "127.0.0.1", port },
          { host: "::1", port },
        ],
        accept: (socket) => this.proxy.accept(socket, client),
        caPem: this.ca.certPem,
        direct: this.directAllowed(client),
        hosts: this.hostNames(),
        watchHosts: (write) => this.watchHosts(write),
      },
      env: proxied
        ? {
            HTTP_PROXY: proxyUrl,
            HTTPS_PROXY: proxyUrl,
            http_proxy: proxyUrl,
            https_proxy: proxyUrl,
            NO_PROXY: noProxy,
            no_proxy: noProxy,
            ...EGRESS_TRUST_ENV,
          }
        : { ...EGRESS_CA_TRUST_ENV },
    };
  }

  /** Whether the sandbox keeps its direct outbound path: not while its policy restricts destinations (the proxy is then the only way out). */
  directAllowed(client: EgressClient): boolean {
    return !restricts(this.policyOf(client));
  }

  /** A sandbox's policy as stored now (a PUT applies to its next request); jobs' tasks have none. */
  policyOf(client: EgressClient): EgressPolicy | undefined {
    if (client.job) return undefined;
    const network = this.options.resources.get<{ spec?: { network?: unknown } }>(client.workspace, "sandbox", client.sandbox)?.doc.spec?.network;
    if (network === undefined) return undefined;
    const key = JSON.stringify(network);
    if (this.parsed.has(key)) return this.parsed.get(key);
    let policy: EgressPolicy | undefined;
    try {
      policy = parseNetwork(network);
    } catch {
      // Stored before validation existed: the safest reading of a policy that cannot be read is "nothing allowed".
      policy = { allowedDomains: ["invalid.invalid"], forbiddenDomains: [], routing: [], bypass: [] };
    }
    if (this.parsed.size >= 256) this.parsed.delete(this.parsed.keys().next().value!);
    this.parsed.set(key, policy);
    return policy;
  }

  /** The simulator's own names: its public and listen hosts, loopback, and every *.localhost (previews, sbx- hosts), on its ports, 80 or 443. */
  isSimulator(host: string, port: number): boolean {
    const { base, listen } = this.options.urls();
    const b = new URL(base);
    const l = new URL(listen);
    const ports = new Set([Number(b.port) || (b.protocol === "https:" ? 443 : 80), Number(l.port) || 80, 80, 443]);
    if (!ports.has(port)) return false;
    const names = new Set([b.hostname, l.hostname, "127.0.0.1", "localhost", "::1", "[::1]"].map((n) => n.toLowerCase().replace(/^\[(.*)\]$/, "$1")));
    const name = host.toLowerCase();
    return names.has(name) || name.endsWith(".localhost") || name.endsWith(`.${b.hostname.toLowerCase()}`);
  }

  /**
   * The names that must lead to the simulator inside a sandbox: the public URL's host, and the host-form
   * previews' names (stored in their spec.url), which a program resolves itself since NO_PROXY's `localhost`
   * bypasses the proxy for `*.preview.localhost` and glibc does not resolve `*.localhost`.
   */
  hostNames(): string[] {
    const names = new Set(simulatorHostNames(new URL(this.options.urls().base)));
    for (const workspace of this.options.workspaces?.() ?? []) {
      for (const preview of this.options.resources.allOfKind<{ spec?: { url?: unknown } }>(workspace, ["preview"])) {
        const url = preview.doc.spec?.url;
        if (typeof url !== "string") continue;
        const name = URL.canParse(url) ? new URL(url).hostname.toLowerCase() : "";
        if (name.includes(".") && isIP(name) === 0) names.add(name);
      }
    }
    return [...names].sort();
  }

  private watchHosts(write: (names: string[]) => void): () => void {
    this.hostWriters.set(write, this.hostNames().join(" "));
    this.hostsTimer ??= setInterval(() => this.refreshHosts(), HOSTS_REFRESH_MS).unref();
    return () => {
      this.hostWriters.delete(write);
      if (this.hostWriters.size > 0 || !this.hostsTimer) return;
      clearInterval(this.hostsTimer);
      this.hostsTimer = undefined;
    };
  }

  private refreshHosts(): void {
    const names = this.hostNames();
    const key = names.join(" ");
    for (const [write, last] of this.hostWriters) {
      if (last === key) continue;
      this.hostWriters.set(write, key);
      try {
        write(names);
      } catch (err) {
        this.options.logger.warn({ err: (err as Error).message }, "updating a sandbox's /etc/hosts failed");
      }
    }
  }

  close(): void {
    if (this.hostsTimer) clearInterval(this.hostsTimer);
    this.hostsTimer = undefined;
    this.hostWriters.clear();
    this.proxy.close();
  }
}

/** The public URL's host when it is a name the sandbox cannot resolve to its gateway by itself (not an address, not localhost). */
export function simulatorHostNames(base: URL): string[] {
  const name = base.hostname.toLowerCase();
  if (isIP(name.replace(/^\[(.*)\]$/, "$1")) !== 0 || name === "localhost" || name.endsWith(".localhost")) return [];
  return [name];
}
