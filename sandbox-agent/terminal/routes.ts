import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { RequestHandler } from "express";
import { createRequire } from "node:module";
import { bearerToken, secretsEqual } from "../../src/auth.js";
import { redactUrl, type Logger } from "../../src/logging.js";
import { rawReply } from "../../src/tunnel.js";
import type { SandboxPaths } from "../paths/sandbox-path.js";
import { TERMINAL_PAGE } from "./page.js";
import { bridge, DEFAULT_FLOW, type FlowLimits } from "./session.js";
import { findShell, terminalEnv } from "./shell.js";
import type { TerminalEntry, TerminalProcess } from "../process/ns-spawn.js";

export const TERMINAL_PATH = "/terminal";
export const TERMINAL_WS_PATH = "/terminal/ws";

export interface TerminalDeps {
  paths: SandboxPaths;
  /** The environment processes start with (POST /environment/reload overlays it). */
  env: () => NodeJS.ProcessEnv;
  logger: Logger;
  token: string | undefined;
  /** Argv prefix every command starts through (the launcher's capability drop), as for processes. */
  wrapper?: readonly string[];
  /** An agent host serving the sandbox from outside: the shell is looked for and started inside through it. */
  entry?: TerminalEntry;
  /** Without a token: why a request a web page may have made is refused (guardUnauthenticated's checks). */
  browserRefusal?: (headers: IncomingMessage["headers"]) => string | undefined;
  flow?: FlowLimits;
}

export interface Terminals {
  /** GET /terminal: the reference's page (xterm.js talking to /terminal/ws). */
  page: RequestHandler;
  /** The server's `upgrade` event for /terminal/ws; false when the request is for another path. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean;
  /** Terminals open now. */
  open(): number;
  /** Ends every terminal (agent shutdown). */
  closeAll(): void;
}

const DEFAULT_SIZE = { cols: 80, rows: 24 };

/**
 * node-pty is a native addon, loaded when the first terminal opens: an agent
 * whose copy was installed without install scripts (so without the compiled
 * binding) still serves everything else, and a terminal then says why it cannot start.
 */
let ptyModule: Promise<typeof import("node-pty")> | undefined;
function loadPty(): Promise<typeof import("node-pty")> {
  ptyModule ??= import("node-pty").catch((err: Error) => {
    ptyModule = undefined;
    throw new Error(`the PTY binding (node-pty) is not usable here: ${err.message.split("\n")[0]}; reinstall sandbox-kit with its install scripts`);
  });
  return ptyModule;
}

/** A size from the query as the reference reads it: a uint16 of 1 or more, else the default. */
function dimension(value: string | null, fallback: number): number {
  if (!value || !/^\d{1,5}$/.test(value)) return fallback;
  const n = Number(value);
  return n >= 1 && n <= 65535 ? n : fallback;
}

/**
 * The CLI (`bl connect sandbox`) and browsers cannot set headers on a
 * WebSocket: they send the token as `?token=`. Only the terminal's routes take
 * it there; it becomes the Authorization header the rest of the auth reads
 * (the access log redacts it from the URL).
 */
export function queryTokenAuth(): RequestHandler {
  return (req, _res, next) => {
    if ((req.path === TERMINAL_PATH || req.path === TERMINAL_WS_PATH) && !bearerToken(req.headers) && typeof req.query.token === "string" && req.query.token) {
      req.headers.authorization = `Bearer ${req.query.token}`;
    }
    next();
  };
}

/**
 * ws (and the https, tls and zlib modules it loads) is loaded on the first terminal upgrade: most sandboxes
 * never open one, and every agent start paid some 20 ms of CPU for it.
 */
let wsModule: typeof import("ws") | undefined;
const loadWs = (): typeof import("ws") => (wsModule ??= createRequire(import.meta.url)("ws") as typeof import("ws"));

export function createTerminals(deps: TerminalDeps): Terminals {
  let server: import("ws").WebSocketServer | undefined;
  const wss = () => (server ??= new (loadWs().WebSocketServer)({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false }));
  const live = new Set<TerminalProcess>();

  function authorized(req: IncomingMessage, url: URL): string | undefined {
    if (deps.token) {
      const given = bearerToken(req.headers) ?? url.searchParams.get("token") ?? undefined;
      if (!given) return "missing bearer token: send Authorization: Bearer <token> or ?token=<token>";
      if (!secretsEqual(given, deps.token)) return "invalid token";
    }
    return undefined;
  }

  /** The shell's directory: its host path (a PTY here) and its sandbox path (a PTY entering the sandbox). */
  async function workingDir(requested: string | null, env: NodeJS.ProcessEnv): Promise<{ host: string; sandbox: string }> {
    const at = (path: string) =>
      deps.paths.use(path, { follow: true }, async (p) => {
        if (!p.stat?.isDirectory()) throw new Error(`${p.sandboxPath}: no such directory`);
        return { host: deps.paths.rootHeld ? "/" : await p.hostPath(), sandbox: p.sandboxPath };
      });
    if (requested) return at(requested);
    // The reference starts the shell in the daemon's directory, which its images set with WORKDIR.
    try {
      if (env.WORKDIR) return await at(env.WORKDIR);
    } catch {
      // a WORKDIR outside the root or missing: the root then
    }
    return at("/");
  }

  async function start(ws: import("ws").WebSocket, url: URL): Promise<void> {
    const env = deps.env();
    let pty: TerminalProcess;
    try {
      const dir = await workingDir(url.searchParams.get("workingDir"), env);
      const shell = findShell(env, url.searchParams.get("shell") ?? undefined, deps.entry?.exists);
      const size = { cols: dimension(url.searchParams.get("cols"), DEFAULT_SIZE.cols), rows: dimension(url.searchParams.get("rows"), DEFAULT_SIZE.rows) };
      if (deps.entry) pty = await deps.entry.open(shell, dir.sandbox, size, terminalEnv(env));
      else {
        const [file, ...args] = [...(deps.wrapper ?? []), shell];
        const { spawn } = await loadPty();
        pty = spawn(file!, args, { name: "xterm-256color", ...size, cwd: dir.host, env: terminalEnv(env) });
      }
    } catch (err) {
      // As the reference: the socket is open, the failure goes as an error frame, then the socket closes.
      ws.send(JSON.stringify({ type: "error", data: `could not start the terminal: ${(err as Error).message}` }));
      ws.close(1011, "terminal start failed");
      return;
    }
    live.add(pty);
    deps.logger.info({ shellPid: pty.pid, open: live.size }, "terminal opened");
    await bridge(ws, pty, deps.logger, deps.flow ?? DEFAULT_FLOW);
    live.delete(pty);
    deps.logger.info({ shellPid: pty.pid, open: live.size }, "terminal closed");
  }

  return {
    page: (_req, res) => {
      res.type("html").send(TERMINAL_PAGE);
    },
    upgrade(req, socket, head) {
      const url = new URL(req.url ?? "/", "http://agent");
      if (url.pathname !== TERMINAL_WS_PATH) return false;
      socket.on("error", () => socket.destroy());
      const line = { url: redactUrl(req.url ?? "/") };
      const denied = authorized(req, url);
      if (denied) {
        deps.logger.warn({ ...line, status: 401 }, "request");
        rawReply(socket, 401, { error: denied });
        return true;
      }
      const refused = deps.browserRefusal?.(req.headers);
      if (refused) {
        deps.logger.warn({ ...line, status: 403 }, "request");
        rawReply(socket, 403, { error: refused });
        return true;
      }
      if ((req.headers.upgrade ?? "").toLowerCase() !== "websocket") {
        rawReply(socket, 400, { error: "GET /terminal/ws upgrades to a WebSocket only" });
        return true;
      }
      deps.logger.debug({ ...line, status: 101 }, "request");
      wss().handleUpgrade(req, socket, head, (ws) => {
        start(ws, url).catch((err) => {
          deps.logger.error({ err }, "terminal failed");
          ws.terminate();
        });
      });
      return true;
    },
    open: () => live.size,
    closeAll() {
      for (const ws of server?.clients ?? []) ws.terminate();
    },
  };
}
