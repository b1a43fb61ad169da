import type { IncomingMessage, RequestListener } from "node:http";
import { listen, type Serving, type UpgradeListener } from "../../src/serve.js";

/**
 * The sandbox API on 127.0.0.1:<port> inside the sandbox (--in-sandbox-port,
 * 8080 as the platform's daemon), beside the launcher's Unix socket. The
 * platform's templates drive their sandbox from their entrypoint with
 * `curl localhost:8080/process ...` and no credential: the reference daemon
 * performs no authentication (reference §5.1, the edge does it). Only an
 * agent alone in its network namespace (the isolating launcher) listens
 * here: its loopback is the sandbox's own, so only the sandbox's processes
 * reach it, which may already do everything this API does for them.
 */

const IN_SANDBOX = Symbol("request from inside the sandbox");

/** Whether a request came in through the in-sandbox listener (requireToken lets it through). */
export function fromInsideSandbox(req: IncomingMessage): boolean {
  return (req as IncomingMessage & { [IN_SANDBOX]?: true })[IN_SANDBOX] === true;
}

/** The handler of a listener inside the sandbox (here, or an agent host's socket in the sandbox's network namespace). */
export function markedInSandbox(handler: RequestListener & UpgradeListener): RequestListener & UpgradeListener {
  const inside: RequestListener & UpgradeListener = (req, res) => {
    (req as IncomingMessage & { [IN_SANDBOX]?: true })[IN_SANDBOX] = true;
    handler(req, res);
  };
  inside.onUpgrade = (req, socket, head) => {
    (req as IncomingMessage & { [IN_SANDBOX]?: true })[IN_SANDBOX] = true;
    if (handler.onUpgrade) handler.onUpgrade(req, socket, head);
    else socket.destroy();
  };
  return inside;
}

/**
 * Listens on 127.0.0.1:port for the sandbox's own processes when asked, and
 * returns one Serving that stops both listeners. `handler` is read on every
 * request (main.ts answers 503 until its app exists).
 */
export async function withInSandboxPort(
  primary: Serving,
  handler: RequestListener & UpgradeListener,
  port: number | undefined,
  maxConnections?: number,
): Promise<Serving & { inSandboxUrl?: string }> {
  if (port === undefined) return primary;
  let inside: Serving;
  try {
    inside = await listen(markedInSandbox(handler), "127.0.0.1", port, { maxConnections });
  } catch (err) {
    await primary.stop(0);
    throw new Error(`--in-sandbox-port ${port}: cannot listen on 127.0.0.1:${port} inside the sandbox: ${(err as Error).message}`);
  }
  return {
    ...primary,
    inSandboxUrl: inside.url,
    stop: async (graceMs) => {
      await Promise.all([primary.stop(graceMs), inside.stop(graceMs)]);
    },
  };
}
