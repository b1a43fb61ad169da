import { closeSync, constants, openSync } from "node:fs";
import { createRequire } from "node:module";
import { Socket } from "node:net";
import { getSystemErrorName } from "node:util";

/**
 * Sockets in a sandbox's network namespace, made by the agent host itself (native/netns.c): the sandbox's
 * `localhost:8080`, its egress gateways and every connection to a port inside it, with no process of the host's
 * in the sandbox to hand them over. Where the addon is not built, `netnsSupport()` says why and sandboxes keep
 * an agent of their own.
 */
interface NetnsAddon {
  openPty(rootFd: number): [number, number];
  setWindowSize(fd: number, cols: number, rows: number): void;
  socketIn(
    userFd: number,
    netFd: number,
    family: number,
    address: string,
    port: number,
    listen: number,
    timeoutMs: number,
    cb: (errno: number, fd: number) => void,
  ): void;
}

let loaded: { addon?: NetnsAddon; why?: string } | undefined;

function load(): { addon?: NetnsAddon; why?: string } {
  if (loaded) return loaded;
  if (process.platform !== "linux") return (loaded = { why: "not Linux" });
  const require = createRequire(import.meta.url);
  // dist/simulator/agent-host -> dist/native; simulator/agent-host (tests on the sources) -> dist/native
  for (const path of ["../../native/netns.node", "../../dist/native/netns.node"]) {
    try {
      return (loaded = { addon: require(path) as NetnsAddon });
    } catch {
      // Not built there.
    }
  }
  return (loaded = { why: "the network-namespace addon (dist/native/netns.node) is not built: no C compiler or Node headers at install" });
}

/** Whether the host can make sockets in sandboxes' network namespaces, or why not. */
export function netnsSupport(): { available: true } | { available: false; reason: string } {
  const { addon, why } = load();
  return addon ? { available: true } : { available: false, reason: why! };
}

/** A terminal of the sandbox's own devpts, through its held root: [master, peer] (the same addon: native/netns.c). */
export function openSandboxPty(rootFd: number): [number, number] {
  const { addon, why } = load();
  if (!addon) throw new Error(why);
  return addon.openPty(rootFd);
}

export function setWindowSize(fd: number, cols: number, rows: number): void {
  load().addon?.setWindowSize(fd, cols, rows);
}

/** A sandbox's user and network namespaces, held open (its PID 1 may be gone by the time a socket is needed). */
export class NetNamespace {
  readonly #user: number;
  readonly #net: number;
  #closed = false;

  constructor(pid: number) {
    this.#user = openSync(`/proc/${pid}/ns/user`, constants.O_RDONLY);
    try {
      this.#net = openSync(`/proc/${pid}/ns/net`, constants.O_RDONLY);
    } catch (err) {
      closeSync(this.#user);
      throw err;
    }
  }

  /** A listening TCP socket on address:port inside the namespace, as a descriptor (listenOnDescriptor, net.Server.listen({fd})). */
  listen(address: string, port: number): Promise<number> {
    return this.#socket(address, port, true, 0);
  }

  /** A TCP connection to address:port inside the namespace; rejects with code ECONNREFUSED when nothing listens there. */
  async connect(address: string, port: number, timeoutMs = 5_000): Promise<Socket> {
    const fd = await this.#socket(address, port, false, timeoutMs);
    return new Socket({ fd, readable: true, writable: true });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeSync(this.#net);
    closeSync(this.#user);
  }

  #socket(address: string, port: number, listen: boolean, timeoutMs: number): Promise<number> {
    const { addon, why } = load();
    if (!addon) return Promise.reject(new Error(why));
    if (this.#closed) return Promise.reject(new Error("the sandbox's network namespace is closed"));
    const family = address.includes(":") ? 6 : 4;
    return new Promise((resolve, reject) => {
      addon.socketIn(this.#user, this.#net, family, address, port, listen ? 1 : 0, timeoutMs, (errno, fd) => {
        if (errno === 0) return resolve(fd);
        const code = getSystemErrorName(-errno);
        const err = new Error(`${code}: ${listen ? "listen on" : "connect to"} ${address}:${port} in the sandbox`) as NodeJS.ErrnoException;
        err.code = code;
        err.errno = -errno;
        reject(err);
      });
    });
  }
}
