/**
 * Progress of an image build or import: a bar redrawn in place on a TTY,
 * plain lines otherwise (logs, CI), and nothing when nobody listens.
 */
export interface Progress {
  /** A new phase ("downloading packages", "unpacking layer 2/3"). */
  phase(label: string): void;
  /** How far the phase is, when it is measurable. */
  advance(done: number, total?: number): void;
  /** A line of the tool's own output worth showing (mmdebstrap's "I: ..." lines). */
  note(text: string): void;
}

export const silentProgress: Progress = { phase() {}, advance() {}, note() {} };

const WIDTH = 30;

function human(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** Progress written to a stream: a redrawn bar when it is a TTY, lines (at most one per phase step of 10 %) when not. */
export function streamProgress(out: NodeJS.WritableStream & { isTTY?: boolean }, prefix: string): Progress {
  const tty = out.isTTY === true;
  let label = "";
  let lastTenth = -1;
  let drawn = false;
  const clear = () => {
    if (tty && drawn) out.write("\r\x1b[2K");
    drawn = false;
  };
  return {
    phase(next) {
      clear();
      label = next;
      lastTenth = -1;
      out.write(`${prefix}: ${label}\n`);
    },
    advance(done, total) {
      if (tty) {
        const bar = total ? `[${"#".repeat(Math.round((done / total) * WIDTH)).padEnd(WIDTH, ".")}] ${Math.floor((done / total) * 100)}%` : `${human(done)}`;
        out.write(`\r\x1b[2K${prefix}: ${label} ${bar}`);
        drawn = true;
        return;
      }
      if (!total) return;
      const tenth = Math.floor((done / total) * 10);
      if (tenth === lastTenth) return;
      lastTenth = tenth;
      out.write(`${prefix}: ${label} ${tenth * 10}%\n`);
    },
    note(text) {
      clear();
      out.write(`${prefix}: ${text}\n`);
    },
  };
}

/** Progress reported to a logger-like callback (the simulator's own log while a create waits for a build). */
export function callbackProgress(report: (text: string) => void): Progress {
  return { phase: (label) => report(label), advance() {}, note: (text) => report(text) };
}

/** One build's progress heard by every caller waiting for it (listeners come and go); remembers the phase for late joiners. */
export interface SharedProgress extends Progress {
  readonly listeners: Set<Progress>;
  readonly current: string | undefined;
}

export function sharedProgress(): SharedProgress {
  const listeners = new Set<Progress>();
  let current: string | undefined;
  return {
    listeners,
    get current() {
      return current;
    },
    phase(label) {
      current = label;
      for (const p of listeners) p.phase(label);
    },
    advance: (done, total) => listeners.forEach((p) => p.advance(done, total)),
    note: (text) => listeners.forEach((p) => p.note(text)),
  };
}
