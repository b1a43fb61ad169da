import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Logger } from "../../src/logging.js";
import type { AgentEndpoint } from "../launcher/endpoint.js";
import type { SandboxTarget } from "./route.js";

/**
 * The sandbox proxy's shapes (sandbox-reverse-proxy.ts): where a request goes (the agent's endpoint and token, the forward
 * plan), what the proxy is built from (its options, the preview router), and what it offers.
 */

/** The agent's endpoint (TCP URL, or Unix socket with a nominal URL) and the sandbox's token. */
export interface Upstream extends AgentEndpoint {
  token: string;
  /** A connection to a port inside the sandbox (AgentHandle.openPort), when its launcher gives one: /port/{n} and previews then take one hop. */
  openPort?(port: number): Promise<Socket>;
}

/** Where one request goes, once routed and allowed. */
export interface ForwardPlan {
  target: SandboxTarget;
  /**
   * "api": a call of the sandbox API (the caller's credentials are replaced by
   * the sandbox's token); "app": traffic for a server inside the sandbox
   * (/port/{n}, previews), whose own Authorization, cookies and Host pass.
   */
  audience: "api" | "app";
  /** The caller authenticated with a platform credential, which the app must not see. */
  platformCredential: boolean;
  /** Last edits of the headers sent upstream (a preview's requestHeaders, its token removed). */
  editRequest?: (headers: OutgoingHttpHeaders) => void;
  /** Headers added to the reply, replacing the app's of the same name (a preview's responseHeaders). */
  replyHeaders?: Record<string, string | string[]>;
  /** A reply given without asking the agent (a preview's CORS preflight). */
  answer?: { status: number; headers: Record<string, string> };
}

/** Preview URLs (simulator/previews): recognised synchronously, then resolved and checked. */
export interface PreviewRouter {
  matches(req: IncomingMessage): boolean;
  /** Throws an ApiError (401 without a valid preview token, 404 for no such preview). */
  plan(req: IncomingMessage): ForwardPlan | Promise<ForwardPlan>;
}

export interface SandboxProxyOptions {
  /** Checks the caller's credential for the target's workspace; throws ApiError 401/403. */
  authorize(req: IncomingMessage, target: SandboxTarget): void | Promise<void>;
  /** The running agent for the target; throws ApiError 404 (no such sandbox) or 503 (its agent is down). */
  upstream(target: SandboxTarget): Upstream | Promise<Upstream>;
  /** Workspace name for a workspace id, for host-name routing. */
  workspaceOfId(id: string): string | undefined;
  previews?: PreviewRouter;
  /** For the errors' timestamps (the simulator's clock). */
  now?: () => number;
  /**
   * Called every `inUseEveryMs` (real time, default 30 s) while an upgraded connection to the target is open:
   * a terminal or a dev server's hot-reload socket is use of the sandbox (ttl-idle, lastUsedAt) between
   * requests, which happen only when it opens.
   */
  markInUse?: (target: SandboxTarget) => void;
  inUseEveryMs?: number;
  /** A request (or an upgraded socket) to the target opens; the release is called once it has closed (standby: an open stream keeps the sandbox awake). */
  inUse?: (target: SandboxTarget) => () => void;
  logger?: Logger;
}

export interface SandboxProxy {
  /** Serves the request and returns true when it is for a sandbox or a preview; false leaves it to the caller. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** The server's `upgrade` event; false when the request is not for a sandbox or a preview. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean;
  /** Express-style middleware over handle(). */
  middleware(): (req: IncomingMessage, res: ServerResponse, next: () => void) => void;
  close(): void;
}
