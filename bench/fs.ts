/**
 * bench:fs — find, fuzzy search and content search through the agent over a
 * generated tree, each beside the system tool doing the same walk in the same
 * run (`find`, `grep -r`), the latency of watch events, and the agent's peak RSS.
 *
 *   BENCH_FS_FILES   files in the tree (default 100000, about 2 KiB each: 200 MB)
 *   BENCH_FS_RUNS    timed runs of each search, the median is printed (default 3)
 *   BENCH_FS_EVENTS  watch events timed (default 1000)
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { get, request, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fmt, peakRssMiB, percentile, startAgentProcess } from "./lib.js";

const files = Number(process.env.BENCH_FS_FILES ?? 100_000);
const runs = Number(process.env.BENCH_FS_RUNS ?? 3);
const eventCount = Number(process.env.BENCH_FS_EVENTS ?? 1000);
const EXTENSIONS = ["ts", "js", "md", "txt", "json"];
const NEEDLE = "NEEDLE_MARKER";
const WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega".split(" ");

/** 100 top directories × 10 subdirectories × files/1000 files; one file in 100 holds the needle. */
function generateTree(dir: string): number {
  let seed = 42;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const lines: string[] = [];
  for (let i = 0; i < 4000; i++) lines.push(Array.from({ length: 8 }, () => WORDS[Math.floor(random() * WORDS.length)]).join(" "));
  const pool = lines.join("\n");
  let bytes = 0;
  const perLeaf = Math.max(1, Math.round(files / 1000));
  let n = 0;
  for (let a = 0; a < 100 && n < files; a++) {
    for (let b = 0; b < 10 && n < files; b++) {
      const leaf = join(dir, `pkg${a}`, `mod${b}`);
      mkdirSync(leaf, { recursive: true });
      for (let c = 0; c < perLeaf && n < files; c++, n++) {
        const start = Math.floor(random() * (pool.length - 2100));
        let text = pool.slice(start, start + 1900 + Math.floor(random() * 200));
        if (n % 100 === 0) text += `\nconst marker = "${NEEDLE}";\n`;
        writeFileSync(join(leaf, `file-${n}.${EXTENSIONS[n % EXTENSIONS.length]}`), text);
        bytes += text.length;
      }
    }
  }
  return bytes;
}

function fetchJson(url: string): Promise<{ total: number; matches: unknown[] | null }> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(`${url}: ${res.statusCode} ${text}`))));
    }).on("error", reject);
  });
}

/**
 * Median wall times of `runs` runs of the agent's search and the tool's, run
 * alternately (after one untimed warm-up of each): on a shared machine the load
 * drifts, and alternating exposes both to the same drift.
 */
async function paired<A, B>(agent: () => Promise<A>, baseline: () => B): Promise<{ agentMs: number; toolMs: number; agent: A; tool: B }> {
  let a = await agent();
  let b = baseline();
  const agentTimes: number[] = [];
  const toolTimes: number[] = [];
  for (let i = 0; i < runs; i++) {
    let start = performance.now();
    a = await agent();
    agentTimes.push(performance.now() - start);
    start = performance.now();
    b = baseline();
    toolTimes.push(performance.now() - start);
  }
  const median = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  return { agentMs: median(agentTimes), toolMs: median(toolTimes), agent: a, tool: b };
}

function tool(command: string, args: string[]): number {
  const out = spawnSync(command, args, { encoding: "buffer", maxBuffer: 1 << 30 });
  if (out.status !== 0 && !(command === "grep" && out.status === 1)) throw new Error(`${command} failed: ${out.stderr}`);
  let lines = 0;
  for (let i = out.stdout.indexOf(10); i >= 0; i = out.stdout.indexOf(10, i + 1)) lines++;
  return lines;
}

/** Writes files one by one into a watched directory and times each event's arrival. */
async function watchLatency(url: string, dir: string, sandboxDir: string): Promise<number[]> {
  mkdirSync(dir, { recursive: true });
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(`${url}/watch/filesystem/${encodeURIComponent(sandboxDir)}`, resolve);
    req.on("error", reject);
    req.end();
  });
  const waiting = new Map<string, () => void>();
  let buffer = "";
  res.setEncoding("utf8");
  res.on("data", (chunk: string) => {
    buffer += chunk;
    const lines = buffer.split("\n");
    buffer = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith("{")) continue;
      const event = JSON.parse(line) as { op: string; name: string };
      if (event.op === "CREATE") waiting.get(event.name)?.();
    }
  });
  const latencies: number[] = [];
  for (let i = 0; i < eventCount; i++) {
    const name = `event-${i}.txt`;
    const arrived = new Promise<void>((resolve) => waiting.set(name, resolve));
    const start = performance.now();
    writeFileSync(join(dir, name), "x");
    await arrived;
    latencies.push(performance.now() - start);
    waiting.delete(name);
  }
  res.destroy();
  return latencies.sort((a, b) => a - b);
}

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "bench-fs-"));
  const root = join(base, "root");
  const tree = join(root, "tree");
  try {
    const g0 = performance.now();
    const bytes = generateTree(tree);
    console.log(
      `bench:fs  ${files} files, ${fmt(bytes / 1e6)} MB in ${files >= 1000 ? 1100 : "a few"} directories (generated in ${fmt((performance.now() - g0) / 1000)} s), median of ${runs} warm runs, agent and tool alternating`,
    );
    const agent = await startAgentProcess(["--root", root, "--data-dir", join(base, "data")]);
    try {
      const api = (route: string, query: string) => `${agent.url}/${route}/${encodeURIComponent("/tree")}?${query}`;

      const find = await paired(
        () => fetchJson(api("filesystem-find", "patterns=*.md&maxResults=0")),
        () => tool("find", [tree, "-type", "f", "-name", "*.md"]),
      );
      if (find.agent.total !== find.tool) console.log(`  (count differs: agent ${find.agent.total}, find ${find.tool})`);
      console.log(
        `find *.md  agent ${fmt(find.agentMs, 0)} ms (${find.agent.total} matches) | find -name ${fmt(find.toolMs, 0)} ms | ratio ${fmt(find.agentMs / find.toolMs, 2)} (target <= 1.50)`,
      );

      const fuzzy = await paired(
        () => fetchJson(api("filesystem-search", "query=pkg42mod7file42md&maxResults=20")),
        () => tool("find", [tree]),
      );
      console.log(
        `fuzzy search  agent ${fmt(fuzzy.agentMs, 0)} ms (${fuzzy.agent.total} best of every entry scored) | find (every entry) ${fmt(fuzzy.toolMs, 0)} ms | ratio ${fmt(fuzzy.agentMs / fuzzy.toolMs, 2)} (target <= 1.50)`,
      );

      const grep = await paired(
        () => fetchJson(api("filesystem-content-search", `query=${NEEDLE}&caseSensitive=true&maxResults=0`)),
        () => tool("grep", ["-r", "-n", NEEDLE, tree]),
      );
      if (grep.agent.total !== grep.tool) console.log(`  (count differs: agent ${grep.agent.total}, grep ${grep.tool})`);
      console.log(
        `grep  agent ${fmt(grep.agentMs, 0)} ms (${grep.agent.total} lines) | grep -rn ${fmt(grep.toolMs, 0)} ms | ratio ${fmt(grep.agentMs / grep.toolMs, 2)} (target <= 1.50)`,
      );

      const grepI = await paired(
        () => fetchJson(api("filesystem-content-search", `query=${NEEDLE.toLowerCase()}&maxResults=0`)),
        () => tool("grep", ["-r", "-n", "-i", NEEDLE.toLowerCase(), tree]),
      );
      console.log(
        `grep -i (the SDK's default)  agent ${fmt(grepI.agentMs, 0)} ms (${grepI.agent.total} lines) | grep -rni ${fmt(grepI.toolMs, 0)} ms | ratio ${fmt(grepI.agentMs / grepI.toolMs, 2)} (target <= 1.50)`,
      );

      const latencies = await watchLatency(agent.url, join(root, "watched"), "/watched");
      console.log(
        `watch  ${latencies.length} CREATE events, write → event line at the client: p50 ${fmt(percentile(latencies, 50), 2)} ms, p99 ${fmt(percentile(latencies, 99), 2)} ms, max ${fmt(latencies[latencies.length - 1]!, 2)} ms (target p99 <= 50)`,
      );
      console.log(`memory  agent peak RSS ${fmt(peakRssMiB(agent.child.pid!))} MiB`);
    } finally {
      await agent.stop();
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
