import { createHash, randomBytes } from "node:crypto";
import { createServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { writeMiB } from "./memory.js";

/**
 * A real in-process app server for port-forwarding tests ("the sandbox's
 * app"): /echo answers what it received (method, url, headers, body size and
 * sha256), /stream sends a first chunk and ends when release() is called,
 * /big sends n MiB, and a WebSocket upgrade on any path echoes text frames.
 */
export interface AppServer {
  port: number;
  server: Server;
  /** Ends the pending /stream replies. */
  release(): void;
  close(): Promise<void>;
}

export interface Echo {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
  sha256: string;
}

const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

export const wsAccept = (key: string) =>
  createHash("sha1")
    .update(key + WS_GUID)
    .digest("base64");

/** A text frame; clients must mask theirs (RFC 6455 §5.3), servers must not. */
export function wsFrame(text: string, masked: boolean): Buffer {
  const payload = Buffer.from(text);
  if (payload.length > 125) throw new Error("test frames are short");
  const mask = masked ? randomBytes(4) : Buffer.alloc(0);
  const body = masked ? Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!)) : payload;
  return Buffer.concat([Buffer.from([0x81, (masked ? 0x80 : 0) | payload.length]), mask, body]);
}

/** Decodes one short text frame, masked or not. */
export function readWsFrame(buf: Buffer): string {
  const len = buf[1]! & 0x7f;
  if ((buf[1]! & 0x80) === 0) return buf.subarray(2, 2 + len).toString();
  const mask = buf.subarray(2, 6);
  return Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]!)).toString();
}

export async function startAppServer(host = "127.0.0.1"): Promise<AppServer> {
  const pending = new Set<() => void>();
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname.endsWith("/stream")) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("first\n");
      pending.add(() => res.end("last\n"));
      return;
    }
    if (url.pathname.endsWith("/big")) {
      const mib = Number(url.searchParams.get("mib") ?? "1");
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": mib * 1024 * 1024 });
      return writeMiB(res, mib);
    }
    const hash = createHash("sha256");
    let bytes = 0;
    req.on("data", (d: Buffer) => {
      bytes += d.length;
      hash.update(d);
    });
    req.on("end", () => {
      const body: Echo = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, bytes, sha256: hash.digest("hex") };
      res.writeHead(url.pathname.endsWith("/created") ? 201 : 200, {
        "content-type": "application/json",
        "set-cookie": ["a=1; Path=/", "b=2; Path=/"],
        "x-app": "yes",
      });
      res.end(JSON.stringify(body));
    });
  });
  const sockets = new Set<Duplex>();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  server.on("upgrade", (req, socket: Duplex) => {
    const key = String(req.headers["sec-websocket-key"] ?? "");
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${wsAccept(key)}\r\nX-Upgrade-Path: ${req.url}\r\n\r\n`,
    );
    socket.on("data", (d: Buffer) => socket.write(wsFrame(`echo:${readWsFrame(d)}`, false)));
    socket.on("error", () => socket.destroy());
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    release: () => {
      for (const end of pending) end();
      pending.clear();
    },
    close: async () => {
      for (const end of pending) end();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export interface WsResult {
  status: number;
  headers: IncomingHttpHeaders;
  /** The echo of the frame sent after the 101, when there was one. */
  echo?: string;
  /** The body of a refusal. */
  body?: string;
}

/**
 * Node 20 has no WebSocket client: the handshake by hand (http.request with
 * Upgrade), then one masked text frame, and the server's reply frame.
 */
export function wsRoundTrip(url: string, headers: Record<string, string>, text: string): Promise<WsResult> {
  const key = randomBytes(16).toString("base64");
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { ...headers, connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": key } });
    req.on("upgrade", (res, socket) => {
      if (res.headers["sec-websocket-accept"] !== wsAccept(key)) return reject(new Error("bad Sec-WebSocket-Accept"));
      socket.once("data", (d: Buffer) => {
        socket.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, echo: readWsFrame(d) });
      });
      socket.write(wsFrame(text, true));
    });
    req.on("response", (res) => {
      let body = "";
      res.on("data", (d) => (body += d)).on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}
