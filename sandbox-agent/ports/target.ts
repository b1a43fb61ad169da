import { connect, type Socket } from "node:net";

/**
 * `/port/{n}/rest?query` → port n and the path to ask the in-sandbox server
 * for ("/rest?query"; "/" when nothing follows the port). Undefined for any
 * other path, or a port outside 1–65535.
 */
export function parsePortPath(url: string): { port: number; path: string } | undefined {
  const match = /^\/port\/(\d{1,5})(?=[/?]|$)(.*)$/.exec(url);
  if (!match) return undefined;
  const port = Number(match[1]);
  if (port < 1 || port > 65_535) return undefined;
  const rest = match[2]!;
  return { port, path: rest.startsWith("/") ? rest : `/${rest}` };
}

/**
 * Connects to a server inside the sandbox: 127.0.0.1 first, then ::1, since
 * dev servers bound to "localhost" listen on either depending on the resolver
 * (Vite on Node ≥ 17 picks ::1 where it comes first). Rejects with the IPv4
 * error when neither answers. `unread`: the socket never starts reading here
 * (a socket handed to another process: a read in this one would take bytes of
 * the reply away from it, and Node keeps a sent handle open until the
 * receiver acknowledges it).
 */
export function connectLocal(port: number, options: { unread?: boolean } = {}): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const attempt = (host: string, onFail: (err: NodeJS.ErrnoException) => void) => {
      const socket = connect({ host, port });
      // Paused before it connects, Node never calls readStart on it.
      if (options.unread) socket.pause();
      socket.once("connect", () => {
        socket.removeAllListeners("error");
        socket.setNoDelay(true);
        resolve(socket);
      });
      socket.once("error", (err: NodeJS.ErrnoException) => {
        socket.destroy();
        onFail(err);
      });
    };
    attempt("127.0.0.1", (v4) => {
      if (v4.code !== "ECONNREFUSED" && v4.code !== "EADDRNOTAVAIL") return reject(v4);
      attempt("::1", () => reject(v4));
    });
  });
}

/** The error a caller of /port/{n} gets when connectLocal() fails (the agent's 502, and the simulator's on the one-hop path). */
export function nobodyListening(port: number, err: NodeJS.ErrnoException): string {
  const why = err.code ?? err.message;
  return err.code === "ECONNREFUSED"
    ? `nothing is listening on port ${port} inside the sandbox (${why}); start a server bound to 0.0.0.0:${port} or 127.0.0.1:${port}`
    : `could not reach port ${port} inside the sandbox (${why})`;
}

/** The error when the in-sandbox server dropped a request it had accepted the connection for. */
export function failedToAnswer(port: number, err: NodeJS.ErrnoException): string {
  return `port ${port} inside the sandbox failed to answer (${err.code ?? err.message})`;
}
