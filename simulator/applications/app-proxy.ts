import { request, type ClientRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { pipeline, type Duplex } from "node:stream";
import { ApiError, errors } from "../../src/errors.js";
import { withoutHopByHop } from "../../src/hop-by-hop.js";
import { rawReply, spliceSockets } from "../../src/tunnel.js";
import { agentRequest } from "../launcher/endpoint.js";
import { edgeError, edgeErrorReply } from "../proxy/edge-errors.js";
import { OWN_PATHS } from "../proxy/route.js";
import type { ResourceStore } from "../store/resources.js";
import type { ApplicationRunner, RunningApplication } from "./runner.js";

/**
 * An application's URL (metadata.url: `{base}/{workspace}/applications/{name}/...`) goes to the port its program
 * listens on, the rest of the path as the request's path. Applications are public ("Applications are always
 * public", the Application model): no credential is asked, and the caller's own headers (Authorization
 * included) reach the program as sent. Streamed both ways; one request per connection to the program.
 */

export interface ApplicationTarget {
  workspace: string;
  name: string;
  path: string;
}

/** `/{workspace}/applications/{name}/...`, or undefined for any other path. */
export function applicationTarget(url: string): ApplicationTarget | undefined {
  const queryAt = url.indexOf("?");
  const [workspace, collection, name, ...rest] = (queryAt === -1 ? url : url.slice(0, queryAt)).slice(1).split("/");
  if (collection !== "applications" || !workspace || !name || OWN_PATHS.has(workspace)) return undefined;
  try {
    return { workspace: decodeURIComponent(workspace), name: decodeURIComponent(name), path: `/${rest.join("/")}${queryAt === -1 ? "" : url.slice(queryAt)}` };
  } catch {
    return undefined;
  }
}

/** The program did not answer: 502, as the platform's edge says of an upstream that fails. */
const badGateway = (message: string) => new ApiError("service_unavailable", message, { status: 502 });

export function createApplicationProxy(runner: ApplicationRunner, resources: ResourceStore, now: () => number) {
  const fail = (req: IncomingMessage, res: ServerResponse, err: ApiError) => {
    if (res.headersSent) return void res.destroy();
    req.resume();
    const reply = edgeErrorReply(err, req, now());
    res.writeHead(reply.status, { ...reply.headers, "content-length": Buffer.byteLength(reply.body) }).end(reply.body);
  };

  /** The running application a request is for, or the edge's error (404 unknown, 503 not running). */
  function running(target: ApplicationTarget): RunningApplication | ApiError {
    const status = resources.get(target.workspace, "application", target.name)?.status;
    const app = runner.get(target.workspace, target.name);
    if (status === undefined || status === "DELETING")
      return edgeError("WORKLOAD_NOT_FOUND", errors.notFound(`application "${target.name}" not found in workspace "${target.workspace}"`));
    if (!app?.handle || status !== "DEPLOYED") {
      const why = status === "DEPLOYED" ? "it is not running" : `it is ${status}`;
      return edgeError(
        "WORKLOAD_UNAVAILABLE",
        errors.serviceUnavailable(`application "${target.name}" in workspace "${target.workspace}" is unavailable: ${why}`),
      );
    }
    return app;
  }

  async function open(app: RunningApplication, req: IncomingMessage, path: string, upgrade = false): Promise<ClientRequest> {
    const headers = withoutHopByHop(req.headers);
    if (upgrade) Object.assign(headers, { connection: "Upgrade", upgrade: req.headers.upgrade ?? "websocket" });
    else headers.connection = "close";
    const handle = app.handle!;
    if (handle.openPort) {
      const socket = await handle.openPort(app.port);
      return request({ createConnection: () => socket, method: req.method, path, headers });
    }
    // Without a connection of its own into the workload (docker): through its agent's /port/{n}.
    return agentRequest(handle, {
      method: req.method ?? "GET",
      path: `/port/${app.port}${path}`,
      headers: { ...headers, "x-blaxel-authorization": `Bearer ${app.token}` },
    });
  }

  /** Serves the request when its path is an application's URL; false for any other. */
  function handle(req: IncomingMessage, res: ServerResponse): boolean {
    const target = applicationTarget(req.url ?? "/");
    if (!target) return false;
    const app = running(target);
    if (app instanceof ApiError) return (fail(req, res, app), true);
    open(app, req, target.path).then(
      (upReq) => {
        upReq.on("response", (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, withoutHopByHop(upRes.headers));
          pipeline(upRes, res, () => {});
        });
        upReq.on("error", (err: Error) => fail(req, res, badGateway(`application "${target.name}" did not answer on port ${app.port}: ${err.message}`)));
        res.on("close", () => {
          if (!res.writableFinished) upReq.destroy();
        });
        pipeline(req, upReq, (err) => err && upReq.destroy());
      },
      (err: Error) => fail(req, res, badGateway(`application "${target.name}" does not answer on port ${app.port}: ${err.message}`)),
    );
    return true;
  }

  /** A WebSocket (a dev server's hot reload) on an application's URL: piped to its program once it answers 101. */
  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const target = applicationTarget(req.url ?? "/");
    if (!target) return false;
    socket.on("error", () => socket.destroy());
    const refuse = (err: ApiError) => rawReply(socket, err.status, { error: err.code, code: err.status, message: err.message });
    const app = running(target);
    if (app instanceof ApiError) return (refuse(app), true);
    open(app, req, target.path, true).then(
      (upReq) => {
        upReq.on("upgrade", (upRes, upSocket, upHead) => {
          if (socket.destroyed) return void upSocket.destroy();
          const lines = [`HTTP/1.1 101 ${upRes.statusMessage ?? "Switching Protocols"}`];
          for (let i = 0; i + 1 < upRes.rawHeaders.length; i += 2) lines.push(`${upRes.rawHeaders[i]}: ${upRes.rawHeaders[i + 1]}`);
          socket.write(`${lines.join("\r\n")}\r\n\r\n`);
          if (upHead.length > 0) socket.write(upHead);
          if (head.length > 0) upSocket.write(head);
          spliceSockets(socket, upSocket);
        });
        // The program refused the upgrade: its reply goes back as it is, then the connection closes.
        upReq.on("response", (upRes) => {
          const lines = [`HTTP/1.1 ${upRes.statusCode ?? 502} ${upRes.statusMessage ?? ""}`];
          for (const [k, v] of Object.entries(withoutHopByHop(upRes.headers))) lines.push(`${k}: ${String(v)}`);
          socket.write(`${[...lines, "connection: close"].join("\r\n")}\r\n\r\n`);
          pipeline(upRes, socket, () => {});
        });
        upReq.on("error", (err: Error) => refuse(badGateway(`application "${target.name}" did not answer on port ${app.port}: ${err.message}`)));
        socket.on("close", () => upReq.destroy());
        upReq.end();
      },
      (err: Error) => refuse(badGateway(`application "${target.name}" does not answer on port ${app.port}: ${err.message}`)),
    );
    return true;
  }

  return { handle, upgrade };
}
