import WebSocket from "ws";

/**
 * A client of the terminal's WebSocket protocol, as the CLI (`bl connect
 * sandbox`) speaks it: JSON frames {type:"input"|"resize"} out,
 * {type:"output"|"error"} in. Collects the output for tests to wait on.
 */
export interface TerminalClient {
  ws: WebSocket;
  /** Everything received so far as output. */
  output(): string;
  /** Error frames received. */
  errors(): string[];
  input(data: string): void;
  resize(cols: number, rows: number): void;
  /** Resolves with the first match of `pattern` in the output received after `from` (an offset into output()). */
  waitFor(pattern: RegExp, options?: { from?: number; timeoutMs?: number }): Promise<RegExpExecArray>;
  /** Resolves when the server closes the socket. */
  closed: Promise<{ code: number; reason: string }>;
}

/** Opens a terminal; rejects with the HTTP status of a refused upgrade (`status` on the error). */
export function openTerminal(url: string, headers: Record<string, string> = {}): Promise<TerminalClient> {
  const ws = new WebSocket(url.replace(/^http/, "ws"), { headers, perMessageDeflate: false });
  let out = "";
  const errs: string[] = [];
  const waiters = new Set<() => void>();
  ws.on("message", (raw) => {
    const frame = JSON.parse(String(raw)) as { type: string; data?: string };
    if (frame.type === "output") out += frame.data ?? "";
    else if (frame.type === "error") errs.push(frame.data ?? "");
    for (const w of waiters) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on("close", (code, reason) => resolve({ code, reason: String(reason) })));
  const client: TerminalClient = {
    ws,
    output: () => out,
    errors: () => errs,
    input: (data) => ws.send(JSON.stringify({ type: "input", data })),
    resize: (cols, rows) => ws.send(JSON.stringify({ type: "resize", cols, rows })),
    closed,
    waitFor(pattern, { from = 0, timeoutMs = 10_000 } = {}) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(out.slice(from));
          if (!match) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(match);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${pattern} in the terminal's output within ${timeoutMs} ms; got ${JSON.stringify(out.slice(from).slice(-500))}`));
        }, timeoutMs);
        if (!check()) waiters.add(check);
        closed.then(() =>
          setTimeout(() => {
            if (waiters.has(check)) {
              waiters.delete(check);
              clearTimeout(timer);
              reject(new Error(`terminal closed before ${pattern}; got ${JSON.stringify(out.slice(from).slice(-500))}`));
            }
          }, 0),
        );
      });
    },
  };
  return new Promise((resolve, reject) => {
    ws.once("open", () => resolve(client));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d));
      res.on("end", () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode} ${body}`), { status: res.statusCode, body })));
    });
    ws.once("error", reject);
  });
}

/** Opens a terminal and waits for the shell's first output (its prompt): input typed before it may be flushed by the shell's own terminal set-up. */
export async function openReadyTerminal(url: string, headers: Record<string, string> = {}): Promise<TerminalClient> {
  const term = await openTerminal(url, headers);
  await term.waitFor(/\S/);
  return term;
}

/** Runs `command` in the terminal and resolves with the text between two markers it prints around its output. */
export async function run(term: TerminalClient, command: string): Promise<string> {
  const tag = `m${Math.random().toString(36).slice(2, 8)}`;
  const from = term.output().length;
  // The markers are built by the shell ("$((1))"), so the echoed command line never matches them.
  term.input(`echo ${tag}-$((1)); ${command}; echo ${tag}-$((2))\n`);
  const match = await term.waitFor(new RegExp(`${tag}-1\\r?\\n([\\s\\S]*?)${tag}-2`), { from });
  return match[1]!.replace(/\r/g, "");
}

/** Polls `check` until it gives a truthy value (returned), or fails after `timeoutMs`. */
export async function until<T>(check: () => T | Promise<T>, { timeoutMs = 10_000 } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${check.toString().slice(0, 120)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
