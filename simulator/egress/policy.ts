import { isIP } from "node:net";

/**
 * A sandbox's `spec.network` as its egress proxy applies it (@blaxel/core's
 * SandboxNetwork, ProxyConfig and ProxyTarget): `allowedDomains` and
 * `forbiddenDomains`, top level (deprecated there) and under `proxy`, merged;
 * when any domain is allowed only those are reachable and forbiddenDomains is
 * ignored ("If both allowedDomains and forbiddenDomains are set,
 * allowedDomains takes precedence"); routing rules inject headers and body
 * fields into requests to their destinations, `{{SECRET:name}}` resolved
 * from the rule's own secrets. Patterns: an exact name, `*.example.com` (any
 * subdomain, not example.com itself) or `*` (everything).
 */

export interface RoutingRule {
  destinations: string[];
  headers: Record<string, string>;
  body: Record<string, string>;
  secrets: Record<string, string>;
}

export interface EgressPolicy {
  allowedDomains: string[];
  forbiddenDomains: string[];
  routing: RoutingRule[];
  bypass: string[];
  /** `spec.network.firewall.rulesets` names "proxy": HTTPS straight to a host (not through the proxy) is refused. */
  proxyOnly?: boolean;
}

export type Verdict = { allowed: true } | { allowed: false; rule: string; reason: string };

export const LIMITS = { domains: 1_000, rules: 100, fields: 100, valueChars: 8_192 };

const LABEL = "[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?";
const DOMAIN_PATTERN = new RegExp(`^(?:\\*|(?:\\*\\.)?${LABEL}(?:\\.${LABEL})*)$`);
const SECRET_REF = /\{\{\s*SECRET:([^}\s]+)\s*\}\}/g;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/;

/** A problem with a sandbox's spec.network: the field and why, for a 400. */
export class NetworkSpecError extends Error {}

type Raw = Record<string, unknown> | undefined;

/** Validates and normalises spec.network; throws NetworkSpecError naming the field. Undefined when it sets no policy at all. */
export function parseNetwork(network: unknown): EgressPolicy | undefined {
  if (network === undefined || network === null) return undefined;
  if (typeof network !== "object" || Array.isArray(network)) throw new NetworkSpecError("spec.network: must be an object");
  const top = network as Raw;
  const proxy = top!.proxy as Raw;
  if (proxy !== undefined && (typeof proxy !== "object" || proxy === null || Array.isArray(proxy)))
    throw new NetworkSpecError("spec.network.proxy: must be an object");
  const policy: EgressPolicy = {
    allowedDomains: [...domains(top!.allowedDomains, "spec.network.allowedDomains"), ...domains(proxy?.allowedDomains, "spec.network.proxy.allowedDomains")],
    forbiddenDomains: [
      ...domains(top!.forbiddenDomains, "spec.network.forbiddenDomains"),
      ...domains(proxy?.forbiddenDomains, "spec.network.proxy.forbiddenDomains"),
    ],
    routing: rules(proxy?.routing),
    bypass: domains(proxy?.bypass, "spec.network.proxy.bypass"),
  };
  const rulesets = (top!.firewall as { rulesets?: unknown } | undefined)?.rulesets;
  if (Array.isArray(rulesets) && rulesets.includes("proxy")) policy.proxyOnly = true;
  return policy;
}

function domains(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new NetworkSpecError(`${field}: must be a list of domain names`);
  if (value.length > LIMITS.domains) throw new NetworkSpecError(`${field}: at most ${LIMITS.domains} entries (${value.length} given)`);
  return value.map((d, i) => {
    if (typeof d !== "string") throw new NetworkSpecError(`${field}[${i}]: must be a string`);
    const name = normalise(d);
    if (!(DOMAIN_PATTERN.test(name) || isIP(name)) || name.length > 253) {
      throw new NetworkSpecError(`${field}[${i}]: "${d.slice(0, 100)}" is not a domain name or pattern (example.com, *.example.com or *)`);
    }
    return name;
  });
}

function rules(value: unknown): RoutingRule[] {
  const field = "spec.network.proxy.routing";
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new NetworkSpecError(`${field}: must be a list of rules`);
  if (value.length > LIMITS.rules) throw new NetworkSpecError(`${field}: at most ${LIMITS.rules} rules (${value.length} given)`);
  return value.map((raw, i) => {
    const at = `${field}[${i}]`;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new NetworkSpecError(`${at}: must be an object`);
    const r = raw as Record<string, unknown>;
    const rule: RoutingRule = {
      destinations: domains(r.destinations ?? [], `${at}.destinations`),
      headers: stringMap(r.headers, `${at}.headers`),
      body: stringMap(r.body, `${at}.body`),
      secrets: stringMap(r.secrets, `${at}.secrets`),
    };
    if (rule.destinations.length === 0) throw new NetworkSpecError(`${at}.destinations: name at least one destination (["*"] for all)`);
    for (const name of Object.keys(rule.headers))
      if (!HEADER_NAME.test(name)) throw new NetworkSpecError(`${at}.headers: "${name.slice(0, 100)}" is not a header name`);
    for (const [where, map] of [
      ["headers", rule.headers],
      ["body", rule.body],
    ] as const) {
      for (const [key, text] of Object.entries(map)) {
        for (const ref of text.matchAll(SECRET_REF)) {
          if (!(ref[1]! in rule.secrets))
            throw new NetworkSpecError(`${at}.${where}.${key}: {{SECRET:${ref[1]}}} names no secret of this rule (${at}.secrets)`);
        }
      }
    }
    return rule;
  });
}

function stringMap(value: unknown, field: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw new NetworkSpecError(`${field}: must be an object of strings`);
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > LIMITS.fields) throw new NetworkSpecError(`${field}: at most ${LIMITS.fields} entries (${entries.length} given)`);
  for (const [key, v] of entries) {
    if (typeof v !== "string") throw new NetworkSpecError(`${field}.${key}: must be a string`);
    if (v.length > LIMITS.valueChars) throw new NetworkSpecError(`${field}.${key}: at most ${LIMITS.valueChars} characters`);
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

function normalise(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/\.$/, "")
    .replace(/^\[(.*)\]$/, "$1");
}

export function matches(pattern: string, host: string): boolean {
  const name = normalise(host);
  if (pattern === "*") return true;
  if (pattern.startsWith("*.")) return name.endsWith(pattern.slice(1));
  return name === pattern;
}

/** Whether a request to `host` may leave, and the rule that decided when it may not. */
export function decide(policy: EgressPolicy | undefined, host: string): Verdict {
  if (!policy) return { allowed: true };
  if (policy.allowedDomains.length > 0) {
    if (policy.allowedDomains.some((p) => matches(p, host))) return { allowed: true };
    return { allowed: false, rule: "allowedDomains", reason: `${normalise(host)} is not in the sandbox's allowedDomains` };
  }
  const hit = policy.forbiddenDomains.find((p) => matches(p, host));
  if (hit) return { allowed: false, rule: "forbiddenDomains", reason: `${normalise(host)} matches forbiddenDomains entry "${hit}"` };
  return { allowed: true };
}

/** Whether the policy restricts destinations at all (then the sandbox's only way out is its proxy). */
export function restricts(policy: EgressPolicy | undefined): boolean {
  return !!policy && (policy.allowedDomains.length > 0 || policy.forbiddenDomains.length > 0);
}

/**
 * Whether the sandbox is given the proxy's variables (HTTP_PROXY, HTTPS_PROXY, NODE_EXTRA_CA_CERTS): on the
 * platform only a sandbox with a proxy configuration has them, and `routing: []` alone does not enable the proxy
 * (the SDK's proxy tests). A policy that restricts destinations gets them too: here the proxy is what enforces it.
 */
export function usesProxy(policy: EgressPolicy | undefined): boolean {
  return !!policy && (policy.routing.length > 0 || restricts(policy));
}

export interface Injection {
  headers: Record<string, string>;
  body: Record<string, string>;
  /** The matching rules' secrets: `{{SECRET:name}}` written by the sandbox's program itself is resolved from these only. */
  secrets: Record<string, string>;
}

/** The headers and body fields the routing rules add to a request to `host`, secrets resolved (later rules win). */
export function injectionFor(policy: EgressPolicy | undefined, host: string): Injection | undefined {
  const hits = policy?.routing.filter((r) => r.destinations.some((p) => matches(p, host))) ?? [];
  if (hits.length === 0) return undefined;
  const out: Injection = { headers: {}, body: {}, secrets: {} };
  for (const rule of hits) {
    const resolve = (text: string) => text.replace(SECRET_REF, (_, name: string) => rule.secrets[name] ?? "");
    for (const [k, v] of Object.entries(rule.headers)) out.headers[k.toLowerCase()] = resolve(v);
    for (const [k, v] of Object.entries(rule.body)) out.body[k] = resolve(v);
    Object.assign(out.secrets, rule.secrets);
  }
  return out;
}

/**
 * `{{SECRET:name}}` in text the sandbox's program sent, replaced by the value of a secret of the rules that
 * apply to its destination; a name none of them holds is left as written (another destination's secret never
 * reaches this one).
 */
export function resolveSecrets(text: string, secrets: Record<string, string>): string {
  if (!text.includes("{{")) return text;
  return text.replace(SECRET_REF, (ref, name: string) => (Object.hasOwn(secrets, name) ? secrets[name]! : ref));
}

/** Whether the rules matching a destination hold any secret the program's own headers or body could name. */
export function hasSecrets(injection: Injection | undefined): boolean {
  return !!injection && Object.keys(injection.secrets).length > 0;
}
