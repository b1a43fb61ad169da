import { Router, json } from "express";
import { isIPv4, isIPv6 } from "node:net";
import { ApiError, errors } from "../../src/errors.js";

/**
 * `PUT /network/tunnel/config` and `DELETE /network/tunnel`: the platform's
 * WireGuard tunnel (the sandbox's egress through a peer). sandbox-agent does
 * not emulate it — no interface, no peer, no routes — but a body is checked
 * as the reference daemon checks it (lib/networking/config.go
 * ParseBase64Config: base64, then JSON, then its defaults and Validate), so a
 * bad configuration gets the reference's 400 or 422 and words, and only a
 * valid one meets the 501 that says what is missing.
 */

/** The configuration's fields as the reference's WireGuardConfig declares them (json tag, Go type). */
const FIELDS = {
  local_ip: "string",
  peer_endpoint: "string",
  peer_public_key: "string",
  private_key: "string",
  mtu: "int",
  listen_port: "int",
  interface_name: "string",
  allowed_ips: "[]string",
  persistent_keepalive: "*int",
  route_all: "bool",
} as const;
type Field = keyof typeof FIELDS;

export class TunnelConfigError extends Error {}

/** Go's base64.StdEncoding.DecodeString: padded, the standard alphabet; the first bad byte named. */
export function decodeStdBase64(s: string): Buffer {
  const clean = s.replace(/[\r\n]/g, "");
  const bad = /[^A-Za-z0-9+/=]/.exec(clean);
  if (bad) throw new TunnelConfigError(`illegal base64 data at input byte ${bad.index}`);
  const pad = clean.indexOf("=");
  if (pad >= 0 && (!/^={1,2}$/.test(clean.slice(pad)) || clean.length % 4 !== 0)) throw new TunnelConfigError(`illegal base64 data at input byte ${pad}`);
  if (clean.length % 4 !== 0) throw new TunnelConfigError(`illegal base64 data at input byte ${clean.length - (clean.length % 4)}`);
  return Buffer.from(clean, "base64");
}

/** Go's net.ParseCIDR: an IPv4 or IPv6 address, a slash, a decimal prefix length within the address's bits. */
function parseCidr(s: string): void {
  const slash = s.indexOf("/");
  const addr = s.slice(0, slash);
  const bits = isIPv4(addr) ? 32 : isIPv6(addr) ? 128 : 0;
  const prefix = s.slice(slash + 1);
  if (slash < 0 || bits === 0 || !/^(0|[1-9]\d{0,2})$/.test(prefix) || Number(prefix) > bits) throw new TunnelConfigError(`invalid CIDR address: ${s}`);
}

/** Go's net.SplitHostPort, for its errors: `address <s>: missing port in address` and the like. */
function splitHostPort(s: string): void {
  const fail = (why: string) => {
    throw new TunnelConfigError(`address ${s}: ${why}`);
  };
  const i = s.lastIndexOf(":");
  if (i < 0) fail("missing port in address");
  if (s.startsWith("[")) {
    const end = s.indexOf("]");
    if (end < 0) fail("missing ']' in address");
    if (end + 1 === s.length) fail("missing port in address");
    if (end + 1 !== i) fail(s[end + 1] === ":" ? "too many colons in address" : "missing port in address");
    if (s.slice(1, end).includes("[")) fail("unexpected '[' in address");
  } else {
    if (s.slice(0, i).includes(":")) fail("too many colons in address");
    if (s.slice(0, i).includes("[")) fail("unexpected '[' in address");
    if (s.slice(0, i).includes("]")) fail("unexpected ']' in address");
  }
  if (s.slice(i + 1).includes("[")) fail("unexpected '[' in address");
  if (s.slice(i + 1).includes("]")) fail("unexpected ']' in address");
}

function wireGuardKey(key: string): void {
  let decoded: Buffer;
  try {
    decoded = decodeStdBase64(key);
  } catch (err) {
    throw new TunnelConfigError(`not valid base64: ${(err as Error).message}`);
  }
  if (decoded.length !== 32) throw new TunnelConfigError(`expected 32 bytes, got ${decoded.length}`);
}

/** JSON into the reference's struct: field names matched case-insensitively, as encoding/json does; wrong types refused in its words. */
function unmarshal(text: string): Partial<Record<Field, unknown>> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new TunnelConfigError(`failed to parse JSON configuration: ${(err as Error).message}`);
  }
  if (value === null) return {};
  const kind = (v: unknown) => (Array.isArray(v) ? "array" : typeof v === "boolean" ? "bool" : typeof v);
  if (typeof value !== "object" || Array.isArray(value))
    throw new TunnelConfigError(`failed to parse JSON configuration: json: cannot unmarshal ${kind(value)} into Go value of type networking.WireGuardConfig`);
  const out: Partial<Record<Field, unknown>> = {};
  for (const [key, v] of Object.entries(value)) {
    const field = (Object.keys(FIELDS) as Field[]).find((f) => f === key) ?? (Object.keys(FIELDS) as Field[]).find((f) => f === key.toLowerCase());
    if (!field || v === null) continue;
    const type = FIELDS[field];
    const wrong = () => {
      const what = typeof v === "number" ? `number ${v}` : kind(v);
      return new TunnelConfigError(
        `failed to parse JSON configuration: json: cannot unmarshal ${what} into Go struct field WireGuardConfig.${field} of type ${type.replace("*", "")}`,
      );
    };
    if (type === "string" && typeof v !== "string") throw wrong();
    if ((type === "int" || type === "*int") && !(typeof v === "number" && Number.isInteger(v))) throw wrong();
    if (type === "bool" && typeof v !== "boolean") throw wrong();
    if (type === "[]string" && !(Array.isArray(v) && v.every((x) => typeof x === "string"))) throw wrong();
    out[field] = v;
  }
  return out;
}

/** ParseBase64Config: decoded, parsed, defaults applied (mtu 1420, allowed_ips 0.0.0.0/0), validated; throws TunnelConfigError. */
export function parseTunnelConfig(base64Config: string): Record<Field, unknown> {
  let text: string;
  try {
    text = decodeStdBase64(base64Config).toString("utf8");
  } catch (err) {
    throw new TunnelConfigError(`failed to decode base64 configuration: ${(err as Error).message}`);
  }
  const c = unmarshal(text);
  const config = {
    local_ip: c.local_ip ?? "",
    peer_endpoint: c.peer_endpoint ?? "",
    peer_public_key: c.peer_public_key ?? "",
    private_key: c.private_key ?? "",
    mtu: (c.mtu as number | undefined) || 1420,
    listen_port: (c.listen_port as number | undefined) || 51820,
    interface_name: (c.interface_name as string | undefined) || "wg0",
    allowed_ips: (c.allowed_ips as string[] | undefined)?.length ? c.allowed_ips : ["0.0.0.0/0"],
    persistent_keepalive: c.persistent_keepalive ?? 25,
    route_all: c.route_all ?? false,
  } as Record<Field, unknown>;
  const invalid = (why: string) => new TunnelConfigError(`invalid configuration: ${why}`);
  const check = (what: string, fn: () => void) => {
    try {
      fn();
    } catch (err) {
      throw invalid(`${what}: ${(err as Error).message}`);
    }
  };
  if (config.local_ip === "") throw invalid("local_ip is required");
  check("local_ip must be in CIDR notation (e.g., 10.0.0.1/32)", () => parseCidr(config.local_ip as string));
  if (config.peer_endpoint === "") throw invalid("peer_endpoint is required");
  check("peer_endpoint must be in host:port format (e.g., 1.2.3.4:51820)", () => splitHostPort(config.peer_endpoint as string));
  if (config.peer_public_key === "") throw invalid("peer_public_key is required");
  check("invalid peer_public_key", () => wireGuardKey(config.peer_public_key as string));
  if (config.private_key === "") throw invalid("private_key is required");
  check("invalid private_key", () => wireGuardKey(config.private_key as string));
  for (const ip of config.allowed_ips as string[]) check(`invalid allowed_ip ${JSON.stringify(ip)}`, () => parseCidr(ip));
  const mtu = config.mtu as number;
  if (mtu < 68 || mtu > 65535) throw invalid(`mtu must be between 68 and 65535, got ${mtu}`);
  return config;
}

const NOT_EMULATED =
  "the platform's WireGuard tunnel is not emulated by sandbox-agent: no WireGuard interface is created, no peer is reached and no route goes through one; the sandbox's egress is the simulator's (its own network namespace, spec.network)";

export function tunnelRouter(): Router {
  const router = Router();
  const body = json({ limit: "64kb", type: () => true });
  router.put("/tunnel/config", body, (req) => {
    const config = (req.body as { config?: unknown } | undefined)?.config;
    // The reference binds {config: string, required}: no body, no config or an empty one is a 400.
    if (typeof config !== "string" || config === "") {
      throw errors.badRequest(
        typeof config === "string" || config === undefined ? "config is required: a base64-encoded JSON tunnel configuration" : "config must be a string",
      );
    }
    try {
      parseTunnelConfig(config);
    } catch (err) {
      if (err instanceof TunnelConfigError) throw errors.unprocessable(`invalid tunnel config: ${err.message}`);
      throw err;
    }
    throw new ApiError("not_implemented", `PUT /network/tunnel/config: the configuration is valid, but ${NOT_EMULATED}`);
  });
  // The reference answers 400 when no tunnel runs; none ever runs here.
  router.delete("/tunnel", () => {
    throw errors.badRequest(`no WireGuard client is running (${NOT_EMULATED})`);
  });
  return router;
}
