import type { IPty } from "node-pty";
import type { TerminalProcess } from "../process/ns-spawn.js";
import type { WebSocket } from "ws";
import { z } from "zod";
import type { Logger } from "../../src/logging.js";
import { killSession } from "./reap.js";

/** The frames of the reference (handler/terminal.go TerminalMessage) and of the CLI's `bl connect sandbox`. */
const ClientFrame = z.discriminatedUnion("type", [
  z.object({ type: z.literal("input"), data: z.string() }),
  z.object({ type: z.literal("resize"), cols: z.number().int().min(1).max(65535), rows: z.number().int().min(1).max(65535) }),
]);

export interface FlowLimits {
  /** Output sent to the socket but not yet taken by the kernel beyond which the PTY is no longer read. */
  outputHighBytes: number;
  /** ...and below which it is read again. */
  outputLowBytes: number;
  /** Input waiting to be written to the PTY beyond which the socket is no longer read. */
  inputHighBytes: number;
}

export const DEFAULT_FLOW: FlowLimits = { outputHighBytes: 256 * 1024, outputLowBytes: 64 * 1024, inputHighBytes: 1024 * 1024 };

/** node-pty's write queue (lib/unixTerminal.js CustomWriteStream): not public, read only to apply backpressure to input. */
function queuedInput(pty: TerminalProcess | IPty): number | undefined {
  const queue = (pty as unknown as { _writeStream?: { _writeQueue?: { buffer: Buffer; offset: number }[] } })._writeStream?._writeQueue;
  if (!Array.isArray(queue)) return undefined;
  let bytes = 0;
  for (const task of queue) bytes += task.buffer.byteLength - task.offset;
  return bytes;
}

/** The close reason the client sees when the shell ends: its status as a shell would print it. */
export function exitReason(exitCode: number, signal: number | undefined): string {
  return signal ? `shell killed by signal ${signal}` : `shell exited with status ${exitCode}`;
}

/**
 * Joins one WebSocket to one PTY until either ends. Memory stays bounded
 * whatever the client reads: output frames not yet handed to the kernel are
 * counted, and past `outputHighBytes` the PTY is paused, so a shell printing
 * without pause blocks on its terminal (as it would on a slow real one) instead
 * of growing the agent; input is held back the same way by pausing the socket.
 * Closing the socket kills the shell's session; the shell exiting closes the
 * socket with code 1000 and its status as the reason (the reference just
 * drops the connection; a close frame lets a client tell exit from failure).
 */
export function bridge(ws: WebSocket, pty: TerminalProcess, logger: Logger, flow: FlowLimits = DEFAULT_FLOW): Promise<void> {
  let pendingOutput = 0;
  let outputPaused = false;
  let inputPaused = false;
  let ended = false;
  let drainTimer: NodeJS.Timeout | undefined;

  const sent = (bytes: number) => () => {
    pendingOutput -= bytes;
    if (outputPaused && pendingOutput <= flow.outputLowBytes && !ended) {
      outputPaused = false;
      pty.resume();
    }
  };
  const data = pty.onData((chunk) => {
    if (ended || ws.readyState !== ws.OPEN) return;
    const frame = JSON.stringify({ type: "output", data: chunk });
    const bytes = Buffer.byteLength(frame);
    pendingOutput += bytes;
    ws.send(frame, sent(bytes));
    if (!outputPaused && pendingOutput > flow.outputHighBytes) {
      outputPaused = true;
      pty.pause();
    }
  });

  // Input backpressure: once node-pty's queue is long, stop reading the socket until the shell has taken it.
  const watchInput = () => {
    const queued = queuedInput(pty);
    if (queued === undefined || ended) return;
    if (!inputPaused && queued > flow.inputHighBytes) {
      inputPaused = true;
      ws.pause();
    }
    if (inputPaused && !drainTimer) {
      drainTimer = setInterval(() => {
        if (ended || (queuedInput(pty) ?? 0) <= flow.inputHighBytes / 4) {
          clearInterval(drainTimer);
          drainTimer = undefined;
          inputPaused = false;
          if (!ended) ws.resume();
        }
      }, 20);
    }
  };

  ws.on("message", (raw, isBinary) => {
    if (ended) return;
    let frame: z.infer<typeof ClientFrame>;
    try {
      frame = ClientFrame.parse(JSON.parse(isBinary ? Buffer.from(raw as Buffer).toString("utf8") : String(raw)));
    } catch {
      // The reference logs and ignores a frame it cannot read; saying so lets a client see its mistake.
      ws.send(JSON.stringify({ type: "error", data: 'unreadable frame: send {type:"input",data} or {type:"resize",cols,rows}' }));
      return;
    }
    if (frame.type === "input") {
      pty.write(frame.data);
      watchInput();
    } else {
      try {
        pty.resize(frame.cols, frame.rows);
      } catch (err) {
        logger.debug({ err }, "terminal resize failed");
      }
    }
  });

  return new Promise<void>((resolve) => {
    const finish = () => {
      if (ended) return;
      ended = true;
      if (drainTimer) clearInterval(drainTimer);
      data.dispose();
      resolve();
    };
    pty.onExit(({ exitCode, signal }) => {
      const reason = exitReason(exitCode, signal);
      // The leftovers of the session (jobs the shell put in the background) end with it.
      killSession(pty.pid);
      finish();
      if (ws.readyState === ws.OPEN) ws.close(1000, reason);
      else ws.terminate();
    });
    ws.on("close", () => {
      finish();
      killSession(pty.pid);
    });
    ws.on("error", () => ws.terminate());
  });
}
