import { createServer, type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from "node:http2";
import { Duplex } from "node:stream";
import type { TLSSocket } from "node:tls";

/**
 * HTTP/2 on an intercepted tunnel: a client that offers `h2` in its TLS
 * handshake through the proxy gets it (ALPN), as on the platform, and each of
 * its streams is handed to the proxy as one request (node:http2's
 * compatibility API), forwarded upstream over HTTP/1.1 with the same policy,
 * header and body injection as a request on an HTTP/1.1 tunnel.
 */
export class H2Front<Origin extends object> {
  private readonly server = createServer();
  private readonly origins = new WeakMap<Http2Session, Origin>();
  private readonly sessions = new Set<Http2Session>();
  private pending: Origin | undefined;

  constructor(onRequest: (req: Http2ServerRequest, res: Http2ServerResponse, origin: Origin) => void) {
    // node:http2 creates the session synchronously in its "connection" listener: the origin is handed over there.
    this.server.on("session", (session: Http2Session) => {
      if (this.pending) this.origins.set(session, this.pending);
      this.sessions.add(session);
      session.on("error", () => session.destroy());
      session.once("close", () => this.sessions.delete(session));
    });
    this.server.on("request", (req: Http2ServerRequest, res: Http2ServerResponse) => {
      const origin = this.origins.get(req.stream.session!);
      if (!origin) return void req.stream.close();
      onRequest(req, res, origin);
    });
    this.server.on("sessionError", () => {});
  }

  /**
   * A tunnel's TLS socket whose client chose `h2`. Its first frames may already be read (they can arrive with the
   * end of the handshake, before the protocol is known), and a session over the socket's own handle would never
   * see them: the session gets a stream over the socket instead, which hands it what was read first.
   */
  accept(socket: TLSSocket, origin: Origin): void {
    this.pending = origin;
    try {
      this.server.emit("connection", streamOver(socket));
    } finally {
      this.pending = undefined;
    }
  }

  close(): void {
    for (const session of this.sessions) session.destroy();
    this.sessions.clear();
  }
}

/** A Duplex passing bytes to and from `socket` with backpressure, ended and destroyed with it. */
function streamOver(socket: TLSSocket): Duplex {
  const stream = new Duplex({
    read: () => void socket.resume(),
    write: (chunk: Buffer, _encoding, done) => void socket.write(chunk, done),
    final: (done) => void socket.end(done),
    destroy: (err, done) => {
      socket.destroy();
      done(err);
    },
  });
  socket.on("data", (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.on("end", () => stream.push(null));
  socket.on("close", () => stream.destroy());
  return stream;
}
