/**
 * bench:upload — multipart upload throughput through the agent, beside a
 * minimal Node server that streams request bodies straight to disk (what this
 * machine's disk and loopback allow), and the agent's complete beside `cat`
 * of the same parts into one file plus an fsync.
 *
 *   BENCH_UPLOAD_MB   total size (default 1024)
 *   BENCH_PART_MB     part size (default 8)
 *   BENCH_PARALLEL    parts in flight (default 4)
 */
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { cpus } from "node:os";
import { cpuTimeMs, fmt, peakRssMiB, startAgentProcess } from "./lib.js";

const MiB = 1024 * 1024;
const totalMiB = Number(process.env.BENCH_UPLOAD_MB ?? 1024);
const partMiB = Number(process.env.BENCH_PART_MB ?? 8);
const parallel = Number(process.env.BENCH_PARALLEL ?? 4);
const partCount = Math.ceil(totalMiB / partMiB);
const BOUNDARY = "----benchboundary7MA4YWxkTrZu0gW";

// A few distinct random buffers, cycled: the client must not be the bottleneck.
const buffers = Array.from({ length: 4 }, () => randomBytes(partMiB * MiB));
const head = Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="blob"\r\nContent-Type: application/octet-stream\r\n\r\n`);
const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);

function send(url: string, method: string, body: Buffer[], headers: Record<string, string | number>, agent: Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, agent }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => (res.statusCode! < 300 ? resolve(text) : reject(new Error(`${method} ${url}: ${res.statusCode} ${text}`))));
    });
    req.on("error", reject);
    for (const b of body) req.write(b);
    req.end();
  });
}

async function inParallel(count: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (next < count) await fn(next++);
  }));
}

/** Baseline: every request body piped straight into its own file. */
async function baseline(dir: string): Promise<{ mbps: number; files: string[]; rss: number }> {
  const files: string[] = [];
  const server = createServer((req, res) => {
    const file = join(dir, `part-${req.url!.slice(1)}`);
    files.push(file);
    pipeline(req, createWriteStream(file)).then(() => res.end("{}"), (err) => res.destroy(err));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const agent = new Agent({ keepAlive: true, maxSockets: parallel });
  const start = performance.now();
  await inParallel(partCount, async (i) => {
    const buf = buffers[i % buffers.length]!;
    await send(`${url}/${i + 1}`, "PUT", [buf], { "Content-Length": buf.length }, agent);
  });
  const seconds = (performance.now() - start) / 1000;
  agent.destroy();
  server.close();
  files.sort((a, b) => Number(a.split("-").pop()) - Number(b.split("-").pop()));
  return { mbps: (partCount * partMiB * MiB) / 1e6 / seconds, files, rss: peakRssMiB(process.pid) };
}

/**
 * The issue asks for the hex MD5 of every part as its etag, and MD5 is serial:
 * one core hashes a stream at this rate whatever else the agent does, so it
 * bounds any agent's part throughput (this bench's client and kernel share the
 * same cores).
 */
function md5Ceiling(): number {
  const start = performance.now();
  let bytes = 0;
  for (let i = 0; bytes < 256 * MiB; i++) {
    const buf = buffers[i % buffers.length]!;
    createHash("md5").update(buf).digest();
    bytes += buf.length;
  }
  return bytes / 1e6 / ((performance.now() - start) / 1000);
}

async function throughAgent(base: string): Promise<{ mbps: number; completeMs: number; rss: number; etagOk: boolean; cpuMsPerMiB: number }> {
  const agentProc = await startAgentProcess(["--root", join(base, "root"), "--data-dir", join(base, "data")]);
  const agent = new Agent({ keepAlive: true, maxSockets: parallel });
  try {
    const init = JSON.parse(await send(`${agentProc.url}/filesystem-multipart/initiate/${encodeURIComponent("/bench/big.bin")}`, "POST", [Buffer.from("{}")], { "Content-Type": "application/json" }, agent));
    const parts: { partNumber: number; etag: string }[] = [];
    const cpu0 = cpuTimeMs(agentProc.child.pid!);
    const start = performance.now();
    await inParallel(partCount, async (i) => {
      const buf = buffers[i % buffers.length]!;
      const res = await send(`${agentProc.url}/filesystem-multipart/${init.uploadId}/part?partNumber=${i + 1}`, "PUT", [head, buf, tail], {
        "Content-Type": `multipart/form-data; boundary=${BOUNDARY}`,
        "Content-Length": head.length + buf.length + tail.length,
      }, agent);
      parts.push(JSON.parse(res));
    });
    const seconds = (performance.now() - start) / 1000;
    const cpuMsPerMiB = (cpuTimeMs(agentProc.child.pid!) - cpu0) / (partCount * partMiB);
    parts.sort((a, b) => a.partNumber - b.partNumber);
    const etagOk = parts.every((p, i) => p.etag === createHash("md5").update(buffers[i % buffers.length]!).digest("hex"));
    const body = Buffer.from(JSON.stringify({ parts }));
    const c0 = performance.now();
    await send(`${agentProc.url}/filesystem-multipart/${init.uploadId}/complete`, "POST", [body], { "Content-Type": "application/json", "Content-Length": body.length }, agent);
    const completeMs = performance.now() - c0;
    const rss = peakRssMiB(agentProc.child.pid!);
    return { mbps: (partCount * partMiB * MiB) / 1e6 / seconds, completeMs, rss, etagOk, cpuMsPerMiB };
  } finally {
    agent.destroy();
    await agentProc.stop();
  }
}

function catAndSync(files: string[], out: string): number {
  const start = performance.now();
  execFileSync("sh", ["-c", 'cat "$@" > "$0" && sync "$0"', out, ...files]);
  return performance.now() - start;
}

async function main(): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "bench-upload-"));
  try {
    mkdirSync(join(base, "baseline"));
    console.log(`bench:upload  ${totalMiB} MiB in ${partCount} parts of ${partMiB} MiB, ${parallel} in parallel, loopback`);
    const agentRun = await throughAgent(base);
    rmSync(join(base, "root"), { recursive: true, force: true });
    const base1 = await baseline(join(base, "baseline"));
    const catMs = catAndSync(base1.files, join(base, "baseline", "cat.out"));
    const md5 = md5Ceiling();
    console.log(`parts  agent ${fmt(agentRun.mbps)} MB/s | baseline (bare node server, body → disk) ${fmt(base1.mbps)} MB/s | ratio ${fmt(agentRun.mbps / base1.mbps, 2)} (target >= 0.85)`);
    // At the target ratio every MiB must pass in (1 / (0.85 × baseline)) s, on all cores together.
    const budget = (cpus().length * (MiB / 1e6) * 1000) / (0.85 * base1.mbps);
    console.log(`cpu  agent ${fmt(agentRun.cpuMsPerMiB, 2)} ms per MiB of parts, of which MD5 etags ${fmt((MiB / 1e6 / md5) * 1000, 2)} (one core hashes ${fmt(md5)} MB/s) | at the target ratio the ${cpus().length} CPUs have ${fmt(budget, 2)} ms per MiB for client, kernel and agent together`);
    console.log(`complete  agent ${fmt(agentRun.completeMs, 0)} ms | cat + fsync of the same parts ${fmt(catMs, 0)} ms | ratio ${fmt(agentRun.completeMs / catMs, 2)} (target <= 1.00)`);
    console.log(`memory  agent peak RSS ${fmt(agentRun.rss)} MiB (target <= 150) | bench client+baseline peak RSS ${fmt(base1.rss)} MiB`);
    console.log(`etags  ${agentRun.etagOk ? "all parts' etags are the MD5 of their bytes" : "MISMATCH"}`);
    if (!agentRun.etagOk) process.exitCode = 1;
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

await main();
