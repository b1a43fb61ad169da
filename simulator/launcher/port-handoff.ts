import type { ChildProcess } from "node:child_process";
import { Socket } from "node:net";
import { connectLocal, nobodyListening } from "../../sandbox-agent/ports/target.js";
import { OPEN_PORT, OpenPortReply, PORT_FAILED, type OpenPortRequest } from "../../src/port-handoff.js";

/**
 * The simulator's side of the port hand-off (src/port-handoff.ts): how a
 * launched sandbox's `openPort` gets a connection to a port inside it.
 */

/** Nothing accepted the connection inside the sandbox: the caller gets the 502 the agent's /port/{n} gives. */
export class PortRefused extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/** Longer than any loopback connect; only an agent that stopped answering gets here. */
const HANDOFF_TIMEOUT_MS = 10_000;

interface Waiting {
  resolve(socket: Socket): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * openPort() for an agent started with `--port-handoff` on `child`'s IPC
 * channel. Rejects with PortRefused when nothing listens on the port, with a
 * plain Error when the agent cannot be asked (its channel closed: it exited
 * or is restarting; the proxy answers 503 then, as for an agent that does not answer).
 */
export function portHandoff(child: ChildProcess, timeoutMs = HANDOFF_TIMEOUT_MS): (port: number) => Promise<Socket> {
  // One listener per channel: it owns every socket the agent sends (those no request waits for are closed).
  let openPort = openers.get(child);
  if (!openPort) openers.set(child, (openPort = handoffOver(child, timeoutMs)));
  return openPort;
}

const openers = new WeakMap<ChildProcess, (port: number) => Promise<Socket>>();

function handoffOver(child: ChildProcess, timeoutMs: number): (port: number) => Promise<Socket> {
  let nextId = 0;
  const waiting = new Map<number, Waiting>();
  const settle = (id: number): Waiting | undefined => {
    const found = waiting.get(id);
    waiting.delete(id);
    if (found) clearTimeout(found.timer);
    return found;
  };
  child.on("message", (message: unknown, handle: unknown) => {
    const reply = OpenPortReply.safeParse(message);
    const found = reply.success ? settle(reply.data.id) : undefined;
    if (!reply.success || !found) {
      // Not an answer to a request in flight (a timed-out one, or not ours): nothing may keep its socket.
      if (handle instanceof Socket) handle.destroy();
      return;
    }
    if (reply.data.type === PORT_FAILED) return found.reject(new PortRefused(reply.data.message, reply.data.code));
    if (handle instanceof Socket) return found.resolve(handle);
    found.reject(new Error("the agent answered the port hand-off without a connection"));
  });
  child.once("disconnect", () => {
    for (const id of [...waiting.keys()]) settle(id)!.reject(new Error("the agent's channel closed (it exited or is restarting)"));
  });
  return (port) =>
    new Promise<Socket>((resolve, reject) => {
      if (!child.connected) return reject(new Error("the agent's channel is closed (it exited or is restarting)"));
      const id = nextId++;
      const timer = setTimeout(() => settle(id)?.reject(new Error(`the agent did not hand over port ${port} within ${timeoutMs} ms`)), timeoutMs);
      waiting.set(id, { resolve, reject, timer });
      const request: OpenPortRequest = { type: OPEN_PORT, id, port };
      child.send(request, (err) => {
        if (err) settle(id)?.reject(err);
      });
    });
}

/**
 * openPort() for a sandbox that shares the host's network (the process
 * launcher): the simulator connects itself, to the address the agent's
 * /port/{n} would (127.0.0.1, then ::1).
 */
export function connectOnHost(port: number): Promise<Socket> {
  return connectLocal(port).catch((err: NodeJS.ErrnoException) => {
    throw new PortRefused(nobodyListening(port, err), err.code);
  });
}
