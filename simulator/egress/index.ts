import { isIP } from "node:net";
import type { Logger } from "../../src/logging.js";
import type { ResourceStore } from "../store/resources.js";
import type { SandboxEgressSpec } from "../launcher/gateway.js";
import { EGRESS_TRUST_ENV } from "../launcher/egress-trust.js";
import { EgressCa } from "./ca.js";
import { parseNetwork, restricts, type EgressPolicy } from "./policy.js";
import type { SimulatorHandler } from "./in-process.js";
import { EgressProxy, type EgressClient } from "./proxy.js";

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
}

export class SimulatorEgress {
  readonly proxy: EgressProxy;
  private madeCa: EgressCa | undefined;
  private readonly parsed = new Map<string, EgressPolicy | undefined>();

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

  /** The sandbox's gateway, CA and environment, for LaunchSpec.egress and env. */
  launchFor(client: EgressClient, bypass: string[] = []): { spec: SandboxEgressSpec; env: Record<string, string> } {
    const base = new URL(this.options.urls().base);
    const port = Number(base.port) || (base.protocol === "https:" ? 443 : 80);
    const proxyUrl = `http://127.0.0.1:${port}`;
    const noProxy = [...ALWAYS_BYPASSED, ...bypass].join(",");
    return {
      spec: {
        listen: [{ host: "127.0.0.1", port }, { host: "::1", port }],
        accept: (socket) => this.proxy.accept(socket, client),
        caPem: this.ca.certPem,
        direct: this.directAllowed(client),
        hosts: simulatorHostNames(base),
      },
      env: {
        HTTP_PROXY: proxyUrl, HTTPS_PROXY: proxyUrl, http_proxy: proxyUrl, https_proxy: proxyUrl,
        NO_PROXY: noProxy, no_proxy: noProxy,
        ...EGRESS_TRUST_ENV,
      },
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

  close(): void {
    this.proxy.close();
  }
}

/** The public URL's host when it is a name the sandbox cannot resolve to its gateway by itself (not an address, not localhost). */
export function simulatorHostNames(base: URL): string[] {
  const name = base.hostname.toLowerCase();
  if (isIP(name.replace(/^\[(.*)\]$/, "$1")) !== 0 || name === "localhost" || name.endsWith(".localhost")) return [];
  return [name];
}
