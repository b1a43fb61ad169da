import type { ChildProcess } from "node:child_process";
import { closeSync } from "node:fs";
import { constants } from "node:os";
import { ReadStream } from "node:tty";
import { spawnOnTerminal, type NamespaceTarget, type TerminalEntry, type TerminalProcess } from "../../sandbox-agent/process/ns-spawn.js";
import { openSandboxPty, setWindowSize } from "./netns.js";

/**
 * Terminals of a hosted sandbox on a PTY of its own devpts instance (bwrap --dev mounts one): the master is
 * opened through the sandbox's held root, the shell is entered through nsexec on the peer, so inside `tty` names
 * `/dev/pts/N` and `ps` shows the terminal, as with an agent inside the sandbox. The host reads and writes the
 * master; the terminal route's flow control (pause/resume) applies as with node-pty.
 */
export function sandboxTerminal(rootFd: number, target: () => NamespaceTarget, nsexec: string): TerminalEntry["open"] {
  return async (shell, workingDir, size, env) => {
    const [master, peer] = openSandboxPty(rootFd);
    try {
      setWindowSize(master, size.cols, size.rows);
      const { child, pid } = await spawnOnTerminal(target(), workingDir, [shell], peer, env, nsexec);
      return new SandboxPty(master, child, pid);
    } catch (err) {
      closeSync(master);
      throw err;
    } finally {
      closeSync(peer);
    }
  };
}

class SandboxPty implements TerminalProcess {
  readonly #stream: ReadStream;
  readonly #exited: Promise<{ exitCode: number; signal?: number }>;

  constructor(
    private readonly master: number,
    child: ChildProcess,
    readonly pid: number,
  ) {
    this.#stream = new ReadStream(master);
    this.#stream.setEncoding("utf8");
    this.#stream.on("error", () => {}); // EIO once the shell's side is closed: the end, said by the exit below
    const ended = (code: number | null, signal: NodeJS.Signals | null) => ({ exitCode: code ?? 0, signal: signal ? constants.signals[signal] : undefined });
    this.#exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve(ended(child.exitCode, child.signalCode));
      else child.once("exit", (code, signal) => resolve(ended(code, signal)));
    });
    // What the shell printed last is read before the master closes.
    void this.#exited.then(() => setTimeout(() => this.#stream.destroy(), 50));
  }

  onData(listener: (data: string) => void) {
    this.#stream.on("data", listener);
    return { dispose: () => void this.#stream.off("data", listener) };
  }

  onExit(listener: (e: { exitCode: number; signal?: number }) => void) {
    let live = true;
    void this.#exited.then((e) => live && listener(e));
    return { dispose: () => void (live = false) };
  }

  write(data: string): void {
    if (!this.#stream.destroyed) this.#stream.write(data);
  }

  resize(cols: number, rows: number): void {
    if (!this.#stream.destroyed) setWindowSize(this.master, cols, rows);
  }

  pause(): void {
    this.#stream.pause();
  }

  resume(): void {
    this.#stream.resume();
  }
}
