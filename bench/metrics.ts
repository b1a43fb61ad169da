/**
 * bench:metrics — the account metrics API over 1,000,000 usage events (90
 * days, 20 workspaces, 2,000 resources), all ingested through the HTTP test
 * hook of a real simulator process. Figures beside baselines measured in the
 * same run:
 *   ingest      vs  a bare better-sqlite3 INSERT loop (same row shape, ts index, no HTTP, no rollups)
 *   query page  vs  SELECT count(*) over the same 30-day window of that table
 *
 *   BENCH_METRICS_EVENTS  events (default 1000000)
 *   BENCH_METRICS_BATCH   events per POST (default 50000)
 *   BENCH_METRICS_SIM_NODE_ARGS  extra node flags for the simulator, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
 */
import { Agent, request } from "node:http";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { BILLING_DIMENSIONS, RESOURCE_TYPES } from "../simulator/metrics/dimensions.js";
import { cpuTimeMs, fmt, peakRssMiB, spawnListening, type Listening } from "./lib.js";

const EVENTS = Number(process.env.BENCH_METRICS_EVENTS ?? 1_000_000);
const BATCH = Number(process.env.BENCH_METRICS_BATCH ?? 50_000);
const WORKSPACES = 20;
const RESOURCES = 2_000;
const DAY = 86_400_000;
const START = Date.parse("2026-01-01T00:00:00Z");
const SPAN = 90 * DAY;
const KEY = "bench-metrics-admin-key";
const QUERY = { startTime: "2026-02-01T00:00:00Z", endTime: "2026-03-03T00:00:00Z", groupBy: "workspace,resource_type,billing_dimension", resolution: "daily" };

/** Deterministic PRNG (mulberry32): the same history every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Event {
  timestamp: string;
  workspace: string;
  resourceType: string;
  resourceName: string;
  resourceUuid: string;
  billingDimension: string;
  usage: number;
}

/** Chronological events (as a simulator records them), resources spread over types and workspaces. */
function generate(): { batches: string[]; events: Array<{ ts: number; ws: number; res: number; dim: number; usage: number }> } {
  const r = rng(2026);
  const resources = Array.from({ length: RESOURCES }, (_, i) => {
    const type = RESOURCE_TYPES[i % RESOURCE_TYPES.length]!;
    return {
      type,
      dims: BILLING_DIMENSIONS.filter((d) => d.resourceType === type),
      ws: `bench-ws-${String(Math.floor(i / (RESOURCES / WORKSPACES))).padStart(2, "0")}`,
      name: `${type.replace("_", "-")}-${i}`,
      uuid: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
    };
  });
  const batches: string[] = [];
  const events: Array<{ ts: number; ws: number; res: number; dim: number; usage: number }> = [];
  let batch: Event[] = [];
  for (let i = 0; i < EVENTS; i++) {
    const ri = Math.floor(r() * RESOURCES);
    const res = resources[ri]!;
    const dim = res.dims[Math.floor(r() * res.dims.length)]!;
    const ts = START + Math.floor((i * SPAN) / EVENTS);
    const usage = Math.round(r() * 3_600_000) / 1000;
    batch.push({
      timestamp: new Date(ts).toISOString(),
      workspace: res.ws,
      resourceType: res.type,
      resourceName: res.name,
      resourceUuid: res.uuid,
      billingDimension: dim.name,
      usage,
    });
    events.push({ ts, ws: Math.floor(ri / (RESOURCES / WORKSPACES)), res: ri, dim: dim.id, usage });
    if (batch.length === BATCH) {
      batches.push(JSON.stringify(batch));
      batch = [];
    }
  }
  if (batch.length) batches.push(JSON.stringify(batch));
  return { batches, events };
}

function send(url: string, method: string, body: string | undefined, agent: Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { Authorization: `Bearer ${KEY}` };
    if (body !== undefined) Object.assign(headers, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
    const req = request(url, { method, headers, agent }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => (res.statusCode! < 300 ? resolve(text) : reject(new Error(`${method} ${url}: ${res.statusCode} ${text.slice(0, 300)}`))));
    });
    req.on("error", reject);
    req.end(body);
  });
}

function startSim(): Promise<Listening> {
  const main = fileURLToPath(new URL("../simulator/main.js", import.meta.url));
  const nodeArgs = (process.env.BENCH_METRICS_SIM_NODE_ARGS ?? "").split(" ").filter(Boolean);
  return spawnListening([...nodeArgs, main, "--port", "0", "--test-hooks", "--api-key", KEY, "--log-level", "warn"]);
}

/** The baseline: the same rows into a bare table with a ts index, one transaction per batch, no HTTP. */
function baseline(events: ReturnType<typeof generate>["events"]): { rate: number; countMs: number } {
  const db = new Database(":memory:");
  db.exec(`CREATE TABLE e (ts INTEGER NOT NULL, ws_id INTEGER NOT NULL, type_id INTEGER NOT NULL, rn_id INTEGER NOT NULL, res_id INTEGER NOT NULL,
    dim_id INTEGER NOT NULL, usage REAL NOT NULL, cost_nanos INTEGER NOT NULL); CREATE INDEX e_ts ON e (ts);`);
  const insert = db.prepare("INSERT INTO e VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  const tx = db.transaction((from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const e = events[i]!;
      insert.run(e.ts, e.ws, 1, e.res, e.res, e.dim, e.usage, Math.round(e.usage * 8333));
    }
  });
  const t0 = performance.now();
  for (let i = 0; i < events.length; i += BATCH) tx(i, Math.min(events.length, i + BATCH));
  const rate = events.length / ((performance.now() - t0) / 1000);
  const count = db.prepare("SELECT count(*) FROM e WHERE ts >= ? AND ts < ?").pluck();
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const c0 = performance.now();
    count.get(Date.parse(QUERY.startTime), Date.parse(QUERY.endTime));
    times.push(performance.now() - c0);
  }
  db.close();
  return { rate, countMs: median(times) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const deadline = setTimeout(() => {
    console.error("bench:metrics: over 3 minutes, giving up");
    process.exit(1);
  }, 180_000);
  deadline.unref();
  console.log(`bench:metrics  ${EVENTS} events over 90 days, ${WORKSPACES} workspaces, ${RESOURCES} resources, ${BATCH} events per POST, loopback`);
  const g0 = performance.now();
  const { batches, events } = generate();
  console.log(
    `  generated ${batches.length} JSON batches (${fmt(batches.reduce((s, b) => s + b.length, 0) / 1e6, 0)} MB) in ${fmt((performance.now() - g0) / 1000)} s`,
  );

  const sim = await startSim();
  const agent = new Agent({ keepAlive: true, maxSockets: 2 });
  try {
    const seed = {
      accounts: [{ id: "bench" }],
      workspaces: Array.from({ length: WORKSPACES }, (_, i) => ({ name: `bench-ws-${String(i).padStart(2, "0")}`, accountId: "bench" })),
      users: [{ email: "admin@bench.test", accountId: "bench", role: "admin", apiKey: `${KEY}-bench` }],
    };
    await send(`${sim.url}/_sim/seed`, "POST", JSON.stringify(seed), agent);

    // Two POSTs in flight: the client writes the next body while the simulator stores the previous one.
    const t0 = performance.now();
    const cpu0 = cpuTimeMs(sim.child.pid!);
    let next = 0;
    await Promise.all(
      [0, 1].map(async () => {
        while (next < batches.length) await send(`${sim.url}/_sim/usage-events`, "POST", batches[next++], agent);
      }),
    );
    const ingestRate = EVENTS / ((performance.now() - t0) / 1000);
    const cpuRate = EVENTS / ((cpuTimeMs(sim.child.pid!) - cpu0) / 1000);
    const base = baseline(events);
    console.log(
      `  ingest through POST /_sim/usage-events   ${fmt(ingestRate / 1000)} k events/s   baseline bare INSERT loop ${fmt(base.rate / 1000)} k events/s   ratio ${fmt(ingestRate / base.rate, 2)}`,
    );
    // Load-independent: events per CPU-second the simulator spent (the machine is shared).
    console.log(`  ingest CPU  ${fmt(cpuRate / 1000)} k events per simulator CPU-second`);

    const getPage = (query: Record<string, string>, cursor: string) =>
      new Promise<{ data: unknown[]; meta: { nextCursor: string } }>((resolve, reject) => {
        const qs = new URLSearchParams({ ...query, ...(cursor ? { cursor } : {}) });
        const req = request(`${sim.url}/v0/accounts/bench/metrics?${qs}`, { headers: { Authorization: `Bearer ${KEY}-bench` }, agent }, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d) => (text += d));
          res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(`GET metrics: ${res.statusCode} ${text.slice(0, 300)}`))));
        });
        req.on("error", reject);
        req.end();
      });
    /** Median time of a full walk (and of its first page) over `runs` runs. */
    const walk = async (query: Record<string, string>, runs: number) => {
      const firsts: number[] = [];
      const walks: number[] = [];
      let pages = 0;
      let groups = 0;
      for (let i = 0; i < runs; i++) {
        const w0 = performance.now();
        let cursor = "";
        pages = 0;
        groups = 0;
        do {
          const body = await getPage(query, cursor);
          if (pages === 0) firsts.push(performance.now() - w0);
          pages++;
          groups += body.data.length;
          cursor = body.meta.nextCursor;
        } while (cursor);
        walks.push(performance.now() - w0);
      }
      return { first: median(firsts), cold: firsts[0]!, walk: median(walks), pages, groups };
    };

    const main = await walk(QUERY, 5);
    console.log(
      `  first page  groupBy ${QUERY.groupBy}, 30 days daily   ${fmt(main.first)} ms (cold ${fmt(main.cold)} ms)   baseline SELECT count(*) of the window ${fmt(base.countMs)} ms   ratio ${fmt(main.first / base.countMs, 2)}`,
    );
    console.log(
      `  full walk   ${main.pages} pages, ${main.groups} groups   ${fmt(main.walk)} ms (${fmt(main.walk / main.pages)} ms per page)   baseline ${main.pages} × count(*) ${fmt(main.pages * base.countMs)} ms   ratio ${fmt(main.walk / (main.pages * base.countMs), 2)}`,
    );
    // The resource-level path (per-resource rollup, thousands of groups), for reference: no target.
    const byUuid = await walk({ ...QUERY, groupBy: "resource_uuid" }, 1);
    console.log(
      `  full walk   groupBy resource_uuid: ${byUuid.pages} pages, ${byUuid.groups} groups   ${fmt(byUuid.walk)} ms (${fmt(byUuid.walk / byUuid.pages)} ms per page)   baseline ${byUuid.pages} × count(*) ${fmt(byUuid.pages * base.countMs)} ms   ratio ${fmt(byUuid.walk / (byUuid.pages * base.countMs), 2)}`,
    );
    console.log(
      `  peak RSS    simulator ${fmt(peakRssMiB(sim.child.pid!), 0)} MiB   bench client (holds the JSON and the baseline DB) ${fmt(peakRssMiB(process.pid), 0)} MiB`,
    );
  } finally {
    agent.destroy();
    await sim.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
