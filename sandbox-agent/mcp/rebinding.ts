import type { RequestHandler } from "express";
import { isLoopbackHost } from "../../src/auth.js";
import { errors } from "../../src/errors.js";
import { hostOf } from "../http/middleware.js";

/**
 * DNS rebinding protection, as the reference's go-sdk transport applies it
 * to `POST /mcp` (§9.11): a request that arrives on a loopback socket must
 * name a loopback host (`localhost`, 127.x, ::1, with any port), else 403. A
 * browser page whose domain was rebound to 127.0.0.1 still sends its own
 * domain in Host. Requests on other interfaces (the platform's, the
 * simulator's) and on a unix socket are not concerned.
 */
export function rejectRebinding(): RequestHandler {
  return (req, _res, next) => {
    const local = req.socket.localAddress;
    const host = req.headers.host ?? "";
    if (local !== undefined && isLoopbackHost(local) && !isLoopbackHost(hostOf(host))) {
      throw errors.forbidden(`Forbidden: invalid Host header ${JSON.stringify(host)}`);
    }
    next();
  };
}
