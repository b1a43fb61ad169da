import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openat2Support } from "../../../sandbox-agent/paths/openat2.js";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { startExchangeSwapper } from "../../helpers/exchange-swapper.js";

/**
 * A process in the sandbox flips `/d` between a real directory and symlinks to `/`, to
 * `/proc/self/root` and to a chain of `..` (renameat2 RENAME_EXCHANGE in a tight loop) while the API
 * reads, writes, lists, deletes (one file, a tree), uploads multipart parts to, searches and watches
 * through `/d/<the outside directory's host path>`, thousands of times. Were any resolution to follow
 * the link on the host, it would land on the outside directory: its sentinels must never show up in an
 * answer or a watch, and nothing there may change. Both confinement modes run the same race.
 */
const RACE_MS = Number(process.env.CONFINEMENT_RACE_MS ?? 10_000);
const WORKERS = 12;
const MARK = "OUTSIDE-SENTINEL";
const MODES = ["path-checks", ...(openat2Support().available ? ["openat2"] : [])];

let agent: TestAgent | undefined;
afterAll(() => agent?.stop());

describe.each(MODES)("a directory flipped to symlinks out of the root during requests (%s)", (mode) => {
  it(
    "never reads, writes, lists, deletes, uploads to or watches anything outside --root",
    async () => {
      agent = await startTestAgent({ confinement: mode, token: undefined });
      expect(agent.runtime.deps.paths.confinement.mode).toBe(mode);
      const root = agent.root;
      const outside = tempDir("sandbox-kit-outside-");
      const rel = outside.slice(1); // the outside directory, spelt as a path under `/d`
      // Outside: the sentinels an escape would read, list, delete or overwrite.
      writeFileSync(join(outside, "secret"), MARK);
      writeFileSync(join(outside, "outside-only-marker"), MARK);
      for (let k = 0; k < 8; k++) writeFileSync(join(outside, `victim-${k}`), MARK);
      mkdirSync(join(outside, "sub"));
      writeFileSync(join(outside, "sub", "keep"), MARK);
      const before = snapshot(outside);
      // Inside: the same names under the real directory, and under the root (where openat2 resolves `/d -> /`).
      for (const base of [join(root, "d", rel), join(root, rel)]) {
        mkdirSync(join(base, "sub"), { recursive: true });
        writeFileSync(join(base, "secret"), "inside");
        for (let k = 0; k < 8; k++) writeFileSync(join(base, `victim-${k}`), "inside");
      }
      symlinkSync("/", join(root, "to-root"));
      symlinkSync("/proc/self/root", join(root, "to-proc"));
      symlinkSync("../".repeat(24), join(root, "to-up"));

      // The host keeps making events in the outside directory: a watch that escaped would report them.
      let hostEvents = 0;
      const churn = setInterval(() => {
        const name = join(outside, `host-evt-${hostEvents++ % 4}`);
        writeFileSync(name, "x");
        unlinkSync(name);
      }, 2);

      const swapper = startExchangeSwapper(root, "d", ["to-root", "to-proc", "to-up"], RACE_MS);
      const leaks: string[] = [];
      const counts: Record<string, number> = {};
      const url = agent.url;
      const at = (p: string) => encodeURIComponent(`/d/${rel}${p}`);
      const check = (op: string, body: string) => {
        counts[op] = (counts[op] ?? 0) + 1;
        if (body.includes(MARK) || body.includes("outside-only-marker") || body.includes("host-evt")) leaks.push(`${op}: ${body.slice(0, 200)}`);
      };
      const text = (r: Response) => r.text();
      const ops: ((w: number, i: number) => Promise<void>)[] = [
        async () => check("read", await fetch(`${url}/filesystem/${at("/secret")}`).then(text)),
        async (w, i) => {
          const body = JSON.stringify({ content: "written" });
          check(
            "write",
            await fetch(`${url}/filesystem/${at(`/w-${w}-${i}`)}`, { method: "PUT", body, headers: { "Content-Type": "application/json" } }).then(text),
          );
        },
        async () => check("list", await fetch(`${url}/filesystem/${at("")}`).then(text)),
        async (_w, i) => check("delete", await fetch(`${url}/filesystem/${at(`/victim-${i % 8}`)}`, { method: "DELETE" }).then(text)),
        async () => check("delete-tree", await fetch(`${url}/filesystem/${at("/sub")}?recursive=true`, { method: "DELETE" }).then(text)),
        async (w, i) => {
          const init = await fetch(`${url}/filesystem-multipart/initiate/${at(`/mp-${w}-${i}`)}`, {
            method: "POST",
            body: "{}",
            headers: { "Content-Type": "application/json" },
          });
          const started = (await init.json().catch(() => ({}))) as { uploadId?: string };
          check("multipart-initiate", JSON.stringify(started));
          if (!started.uploadId) return;
          const form = new FormData();
          form.append("file", new Blob(["part"]), "blob");
          const part = await fetch(`${url}/filesystem-multipart/${started.uploadId}/part?partNumber=1`, { method: "PUT", body: form });
          const etag = ((await part.json().catch(() => ({}))) as { etag?: string }).etag;
          check("multipart-part", String(etag));
          const parts = JSON.stringify({ parts: [{ partNumber: 1, etag }] });
          check(
            "multipart-complete",
            await fetch(`${url}/filesystem-multipart/${started.uploadId}/complete`, {
              method: "POST",
              body: parts,
              headers: { "Content-Type": "application/json" },
            }).then(text),
          );
        },
        async () => check("grep", await fetch(`${url}/filesystem-content-search/${at("")}?query=SENTINEL`).then(text)),
        async () => check("find", await fetch(`${url}/filesystem-find/${at("")}?patterns=*`).then(text)),
        async () => {
          const abort = new AbortController();
          const timer = setTimeout(() => abort.abort(), 40);
          let body = "";
          try {
            const res = await fetch(`${url}/watch/filesystem/${at("")}`, { signal: abort.signal });
            const reader = res.body!.getReader();
            for (;;) {
              const { done, value } = await reader.read();
              if (done) break;
              body += Buffer.from(value).toString();
            }
          } catch {
            // aborted: the watch ran its 40 ms
          } finally {
            clearTimeout(timer);
          }
          check("watch", body);
        },
      ];
      const worker = async (w: number) => {
        for (let i = 0; swapper.running; i++) await ops[(w + i) % ops.length]!(w, i).catch(() => undefined);
      };
      await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
      const swaps = await swapper.done;
      clearInterval(churn);
      for (const name of readdirSync(outside)) if (name.startsWith("host-evt-")) rmSync(join(outside, name), { force: true });

      const total = Object.values(counts).reduce((a, b) => a + b, 0);
      console.log(`confinement race (${mode}, ${swapper.kind} swapper pid ${swapper.pid}): ${swaps} swaps, ${total} requests`, counts);
      expect(swaps).toBeGreaterThan(0);
      expect(total).toBeGreaterThan(WORKERS);
      expect(leaks).toEqual([]);
      expect(snapshot(outside)).toEqual(before);
      expect(existsSync(join(outside, "sub", "keep"))).toBe(true);
      await agent.stop();
      agent = undefined;
    },
    RACE_MS + 60_000,
  );
});

/** Every file under `dir` with its content. */
function snapshot(dir: string, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) Object.assign(out, snapshot(path, `${prefix}${entry.name}/`));
    else out[`${prefix}${entry.name}`] = readFileSync(path, "utf8");
  }
  return out;
}
