import { groupAlive } from "./os.js";
import { capLog, STREAMS, type LogFiles, type StreamName } from "./output.js";

const LINGER_CAP_MS = 1_000;

export interface LingerOptions {
  files: LogFiles;
  /** Leader pid = process group id. */
  pid: number;
  capBytes: number;
  dropped: Readonly<Record<StreamName, number>>;
  /** False once the record is forgotten (history) or the agent closes: stop then. */
  stillKnown(): boolean;
  onDropped(dropped: Record<StreamName, number>): void;
  onStop(): void;
}

/**
 * Keeps an ended process's output files capped while members of its process
 * group live on and write to them — `sh -c 'server &'` ends at once, the
 * server does not. Stops when the group is empty or the record is gone.
 */
export function capWhileGroupLives(o: LingerOptions): { stop(): void } {
  const dropped = { ...o.dropped };
  let busy = false;
  const stop = () => {
    clearInterval(timer);
    o.onStop();
  };
  const timer = setInterval(() => {
    if (busy) return;
    if (!o.stillKnown()) return stop();
    const alive = groupAlive(o.pid);
    busy = true;
    void (async () => {
      let changed = false;
      for (const s of STREAMS) {
        const result = await capLog(o.files.live(s), o.files.old(s), o.capBytes, Math.floor(o.capBytes / 2));
        if (result) {
          dropped[s] += result.dropped;
          changed = true;
        }
      }
      if (changed && o.stillKnown()) o.onDropped({ ...dropped });
    })()
      .catch(() => undefined) // files removed meanwhile: the next tick notices the record is gone
      .finally(() => {
        busy = false;
        if (!alive) stop(); // that was the last cap: nobody writes any more
      });
  }, LINGER_CAP_MS);
  timer.unref();
  return { stop };
}
