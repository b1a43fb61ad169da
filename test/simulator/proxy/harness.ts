import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { ApiError, errors } from "../../../src/errors.js";
import { createSandboxProxy, type SandboxProxy, type SandboxProxyOptions, type SandboxTarget, type Upstream } from "../../../simulator/proxy/index.js";

/** Callers' keys and the workspace each is valid for; the simulator's auth plays this part in production. */
export const KEYS: Record<string, string> = { "key-of-ws": "ws", "key-of-other": "other" };

export interface ProxyHarness {
  url: string;
  port: number;
  proxy: SandboxProxy;
  /** sandbox name (workspace "ws") → its agent; absent = no such sandbox. */
  sandboxes: Map<string, Upstream>;
  close(): Promise<void>;
}

function authorize(req: IncomingMessage, target: SandboxTarget): void {
  const header = req.headers.authorization ?? req.headers["x-blaxel-authorization"];
  const key = typeof header === "string" ? /^Bearer (.+)$/.exec(header)?.[1] : undefined;
  if (!key || !KEYS[key]) throw errors.unauthorized();
  if (KEYS[key] !== target.workspace) throw errors.forbidden(`this credential has no access to workspace "${target.workspace}"`);
}

/** The proxy on its own node:http server, as the simulator mounts it. */
export async function startProxy(extra: Partial<SandboxProxyOptions> = {}): Promise<ProxyHarness> {
  const sandboxes = new Map<string, Upstream>();
  const proxy = createSandboxProxy({
    authorize,
    upstream: (t) => {
      const up = t.workspace === "ws" ? sandboxes.get(t.sandbox) : undefined;
      if (!up) throw errors.notFound(`sandbox "${t.sandbox}" not found in workspace "${t.workspace}"`);
      return up;
    },
    workspaceOfId: (id) => (id === "ws-id-1" ? "ws" : undefined),
    ...extra,
  });
  const server: Server = createServer((req, res) => {
    if (!proxy.handle(req, res)) {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: "not_found" }));
    }
  });
  server.on("upgrade", (req, socket, head) => {
    if (!proxy.upgrade(req, socket, head)) socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    proxy,
    sandboxes,
    close: async () => {
      proxy.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export { ApiError };
