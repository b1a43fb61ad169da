/**
 * bench:terminal — the web terminal through the simulator's sandbox URL, under
 * the default isolating launcher where it can run (else the process launcher;
 * BENCH_TERMINAL_LAUNCHER=bwrap|process chooses):
 *   keystroke    one input frame, then the output frame echoing it (the terminal's own echo; `cat` reads the
 *                keys in non-canonical mode), one key at a time: p50 and p99 over BENCH_TERMINAL_KEYS keys;
 *   ws echo      the same frames against a bare WebSocket echo server (the `ws` package) in its own process:
 *                the floor of any WebSocket round trip on this machine, measured alternately in the same run;
 *   cat          `cat` of a BENCH_TERMINAL_MB MiB text file through the terminal: MiB/s of output received,
 * with the peak RSS of the simulator and of the sandbox's agent.
 *
 *   BENCH_TERMINAL_KEYS  keystrokes (default 1000)
 *   BENCH_TERMINAL_MB    size of the file cat prints (default 100)
 */
import { fork, type ChildProcess } from "node:child_process";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import WebSocket, { WebSocketServer } from "ws";
import { serveSimulator } from "../simulator/serve.js";
import { probeIsolation } from "../simulator/launcher/isolation.js";
import { cmdlineOf, descendantsOf } from "../simulator/launcher/proc.js";
import { fmt, peakRssMiB, percentile } from "./lib.js";

const KEYS = Number(process.env.BENCH_TERMINAL_KEYS ?? 1000);
const MB = Number(process.env.BENCH_TERMINAL_MB ?? 100);
const KEY = "bench-terminal-admin-key";
const SELF = fileURLToPath(import.meta.url);

type Reply = { url?: string; agentPid?: number; rss?: number };

function role(name: string, ...args: string[]): Promise<{ child: ChildProcess; first: Reply; ask(): Promise<Reply> }> {
  const child = fork(SELF, [`--${name}`, ...args], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const next = () =>
    new Promise<Reply>((resolve, reject) => {
      child.once("message", (m) => resolve(m as Reply));
      child.once("exit", (code, signal) => reject(new Error(`${name} process exited with ${signal ?? code}`)));
    });
  return next().then((first) => ({
    child,
    first,
    ask: () => {
      const r = next();
      child.send({});
      return r;
    },
  }));
}

function answerRss(): void {
  process.on("message", () => process.send!({ rss: peakRssMiB(process.pid) }));
}

/** Role: the simulator with one sandbox. */
async function serveSim(launcher: string): Promise<void> {
  const sim = await serveSimulator({ port: 0, apiKey: KEY, logLevel: "silent", imageSource: "host", sandboxNetwork: "none" }, { launcher });
  const res = await fetch(`${sim.url}/v0/sandboxes`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": "default", "content-type": "application/json" },
    body: JSON.stringify({ metadata: { name: "bench" } }),
  });
  if (!res.ok) throw new Error(`create: ${res.status} ${await res.text()}`);
  await sim.agents.upstream({ workspace: "default", sandbox: "bench", path: "/" });
  process.send!({ url: sim.url, agentPid: sim.agents.get("default", "bench")!.pid });
  answerRss();
  process.on("disconnect", () => void sim.stop().then(() => process.exit(0)));
}

/** Role: a bare WebSocket server answering each input frame with an output frame of the same data. */
function serveEcho(): void {
  const wss = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate: false });
  wss.on("connection", (ws) =>
    ws.on("message", (raw) => {
      const frame = JSON.parse(String(raw)) as { data: string };
      ws.send(JSON.stringify({ type: "output", data: frame.data }));
    }),
  );
  wss.on("listening", () => {
    process.send!({ url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}` });
    answerRss();
  });
  process.on("disconnect", () => process.exit(0));
}

interface Client {
  ws: WebSocket;
  /** Resolves when output containing `text` has arrived after this call. */
  next(text: string): Promise<void>;
  bytes(): number;
}

function connect(url: string): Promise<Client> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  let pending: { text: string; resolve: () => void } | undefined;
  let seen = "";
  let bytes = 0;
  let tail = "";
  ws.on("message", (raw) => {
    const frame = JSON.parse(String(raw)) as { type: string; data?: string };
    if (frame.type !== "output") return;
    bytes += frame.data!.length;
    if (process.env.BENCH_TERMINAL_DEBUG) tail = (tail + frame.data).slice(-300);
    if (!pending) return;
    seen = (seen + frame.data).slice(-256);
    if (seen.includes(pending.text)) {
      const p = pending;
      pending = undefined;
      seen = "";
      p.resolve();
    }
  });
  return new Promise((resolve, reject) => {
    if (process.env.BENCH_TERMINAL_DEBUG) setInterval(() => console.error(JSON.stringify(tail)), 3000).unref();
    ws.once("open", () => resolve({ ws, bytes: () => bytes, next: (text) => new Promise<void>((r) => (pending = { text, resolve: r })) }));
    ws.once("error", reject);
  });
}

const input = (c: Client, data: string) => c.ws.send(JSON.stringify({ type: "input", data }));

/**
 * Sends a command line until the marker it prints arrives: a shell that is still starting, or just back from a
 * ^C, may discard keys typed ahead of its line editor (readline flushes pending input when it takes the terminal).
 */
async function command(c: Client, line: string, marker: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const seen = c.next(marker);
    input(c, line);
    const timedOut = await Promise.race([seen.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 2000))]);
    if (!timedOut) return;
    if (attempt === 10) throw new Error(`no ${marker} from the terminal`);
  }
}

async function keystroke(c: Client, key: string): Promise<number> {
  const start = process.hrtime.bigint();
  const echoed = c.next(key);
  input(c, key);
  await echoed;
  return Number(process.hrtime.bigint() - start) / 1e6;
}

async function main(): Promise<void> {
  const launcher = process.env.BENCH_TERMINAL_LAUNCHER ?? (probeIsolation().unavailable ? "process" : "bwrap");
  const sim = await role("sim", launcher);
  const echo = await role("echo");
  try {
    const terminalUrl = `${sim.first.url!.replace(/^http/, "ws")}/sbx/default/bench/terminal/ws?token=${KEY}`;
    const term = await connect(terminalUrl);
    // The shell's prompt first: keys typed before its line editor starts may be discarded by it.
    while (term.bytes() === 0) await new Promise((r) => setTimeout(r, 10));
    // Non-canonical mode with echo: the terminal echoes each key at once, cat reads it and prints nothing.
    // (Commands end with \r, as a terminal's Enter; the markers are computed so the echoed line never matches.)
    await command(term, "stty -icanon; echo ready-$((1)); cat > /dev/null\r", "ready-1");
    const direct = await connect(echo.first.url!);
    const keys = { terminal: [] as number[], direct: [] as number[] };
    const alphabet = "abcdefghijklmnopqrstuvwxyz";
    for (let i = 0; i < KEYS; i++) {
      const key = alphabet[i % alphabet.length]!;
      keys.terminal.push(await keystroke(term, key));
      keys.direct.push(await keystroke(direct, key));
    }
    direct.ws.close();
    input(term, "\u0003");
    await command(term, "stty sane; echo back-$((2+2))\r", "back-4");
    const show = (name: string, xs: number[]) => {
      const sorted = [...xs].sort((a, b) => a - b);
      return `${name.padEnd(26)} p50 ${fmt(percentile(sorted, 50), 2)} ms  p99 ${fmt(percentile(sorted, 99), 2)} ms`;
    };
    const p99 = (xs: number[]) =>
      percentile(
        [...xs].sort((a, b) => a - b),
        99,
      );
    console.log(
      `bench:terminal  launcher ${launcher}  ${KEYS} keystrokes  load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`,
    );
    console.log(show("keystroke via simulator", keys.terminal));
    console.log(show("ws echo server (baseline)", keys.direct));
    console.log(`p99 above the baseline: ${fmt(p99(keys.terminal) - p99(keys.direct), 2)} ms`);

    // Throughput: a text file of MB MiB made in the sandbox, then cat through the terminal.
    const made = term.next("made-2");
    input(term, `head -c ${MB * 1024 * 1024} /dev/zero | tr '\\0' 'x' | fold -w 99 > /tmp/bench-cat.txt; echo made-$((1+1))\r`);
    await made;
    const before = term.bytes();
    const done = term.next("cat-done-3");
    const start = process.hrtime.bigint();
    input(term, "cat /tmp/bench-cat.txt; echo cat-done-$((1+2))\r");
    await done;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    const received = (term.bytes() - before) / 1024 / 1024;
    console.log(`cat ${MB} MiB through the terminal: ${fmt(received)} MiB received in ${fmt(seconds, 2)} s = ${fmt(received / seconds)} MiB/s`);
    input(term, "rm -f /tmp/bench-cat.txt; exit\r");
    const agentPid =
      descendantsOf(sim.first.agentPid!)
        .filter((p) =>
          cmdlineOf(p)
            .join(" ")
            .match(/sandbox-agent\/main\.js|warm-agent\.js/),
        )
        .pop() ?? sim.first.agentPid!;
    console.log(
      `peak RSS: simulator ${fmt((await sim.ask()).rss!)} MiB, agent ${fmt(peakRssMiB(agentPid))} MiB, echo server ${fmt((await echo.ask()).rss!)} MiB, this client ${fmt(peakRssMiB(process.pid))} MiB`,
    );
    term.ws.close();
  } finally {
    sim.child.disconnect();
    echo.child.disconnect();
  }
}

const arg = process.argv[2];
if (arg === "--sim") void serveSim(process.argv[3]!);
else if (arg === "--echo") serveEcho();
else await main();
