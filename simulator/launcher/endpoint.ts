import { closeSync, openSync } from "node:fs";
import { request, type Agent, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import { basename, dirname } from "node:path";

/**
 * Where a sandbox's agent answers: a loopback TCP URL (process and docker
 * launchers) or a Unix socket bound out of the sandbox (the isolating
 * launcher: no host port per sandbox). Every simulator caller that talks to an
 * agent (proxy, control-plane client, health checks, drive unmounts) opens its
 * requests here, so both kinds work everywhere.
 */
export interface AgentEndpoint {
  /** Base URL: the TCP address, or a nominal http://sandbox-agent when socketPath is set. */
  url: string;
  /** Host path of the agent's Unix socket; when set, requests go there instead of url's host and port. */
  socketPath?: string;
}

/** The base URL an agent reached through a Unix socket is given (Host header and logs only). */
export const SOCKET_URL = "http://sandbox-agent";

/** sun_path holds 108 bytes with its NUL: longer socket paths are reached through a directory descriptor. */
const MAX_SOCKET_PATH = 107;
const dirFds = new Map<string, number>();

/**
 * A connectable path for a socket: the path itself, or, when it is too long
 * for sun_path (deep --data directories), /proc/self/fd/<dir fd>/<name>.
 */
export function connectablePath(socketPath: string): string {
  if (Buffer.byteLength(socketPath) <= MAX_SOCKET_PATH) return socketPath;
  const dir = dirname(socketPath);
  let fd = dirFds.get(dir);
  if (fd === undefined) {
    fd = openSync(dir, "r");
    dirFds.set(dir, fd);
  }
  return `/proc/self/fd/${fd}/${basename(socketPath)}`;
}

/** Releases what connectablePath() holds for a socket (its agent has exited). */
export function forgetSocket(socketPath: string): void {
  const dir = dirname(socketPath);
  const fd = dirFds.get(dir);
  if (fd === undefined) return;
  dirFds.delete(dir);
  try {
    closeSync(fd);
  } catch {
    // Already closed.
  }
}

export interface AgentRequestOptions {
  method?: string;
  /** Path and query, starting with "/". */
  path: string;
  headers?: OutgoingHttpHeaders;
  agent?: Agent;
  signal?: AbortSignal;
}

/** The host header an agent request carries. */
export function endpointHost(endpoint: AgentEndpoint): string {
  return new URL(endpoint.url).host;
}

/** Opens an HTTP request to the agent (the caller writes the body and ends it). */
export function agentRequest(endpoint: AgentEndpoint, options: AgentRequestOptions): ClientRequest {
  const base = new URL(endpoint.url);
  const common = { method: options.method ?? "GET", path: options.path, headers: options.headers, agent: options.agent, signal: options.signal };
  if (endpoint.socketPath) return request({ ...common, socketPath: connectablePath(endpoint.socketPath), headers: { host: base.host, ...options.headers } });
  return request({ ...common, protocol: base.protocol, hostname: base.hostname, port: base.port });
}

export interface AgentReply {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/**
 * A small buffered exchange with an agent (health checks, control-plane calls
 * whose bodies are JSON): the whole reply as text. Streams go through agentRequest.
 */
export function agentFetch(endpoint: AgentEndpoint, options: AgentRequestOptions & { body?: string | Buffer; timeoutMs?: number }): Promise<AgentReply> {
  const signal = options.timeoutMs ? AbortSignal.any([AbortSignal.timeout(options.timeoutMs), ...(options.signal ? [options.signal] : [])]) : options.signal;
  return new Promise((resolve, reject) => {
    const headers: OutgoingHttpHeaders = { ...options.headers };
    if (options.body !== undefined) headers["content-length"] = Buffer.byteLength(options.body);
    const req = agentRequest(endpoint, { ...options, headers, signal });
    req.once("error", reject);
    req.once("response", (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.once("error", reject);
      res.once("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
    });
    req.end(options.body);
  });
}
