import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_MAIN } from "../../helpers/agent-process.js";
import { tempDir } from "../../helpers/agent.js";
import { agentClient } from "../../helpers/multipart.js";
import { sandboxAt } from "../../helpers/sdk.js";

/**
 * The bwrap and docker layouts: the sandbox root and the agent's data dir are
 * two bind mounts of one filesystem, so rename(2) between them fails with
 * EXDEV although both report the same st_dev. The agent runs in a mount
 * namespace of its own (unshare -Urm: no root needed where user namespaces
 * are allowed), where both bind mounts exist; they vanish with it.
 */
const base = tempDir("cross-mount-");
const rootSource = join(base, "fs/root");
const dataSource = join(base, "fs/data");
const root = join(base, "root");
const data = join(base, "data");
for (const dir of [rootSource, dataSource, root, data]) mkdirSync(dir, { recursive: true });

const MOUNTS = 'mount --bind "$1" "$2" && mount --bind "$3" "$4" && shift 4 && exec "$@"';
const inNamespace = (command: string[]) => ["-Urm", "sh", "-c", MOUNTS, "sh", rootSource, root, dataSource, data, ...command];

/** Whether this machine can make the namespace, and whether a rename across the two mounts really fails there. */
function probe(): string | undefined {
  const check = "try { require('fs').renameSync(process.argv[1], process.argv[2]); console.log('renamed') } catch (e) { console.log(e.code) }";
  writeFileSync(join(dataSource, "probe"), "x");
  const result = spawnSync("unshare", inNamespace([process.execPath, "-e", check, join(data, "probe"), join(root, "probe")]), { encoding: "utf8" });
  if (result.error || result.status !== 0) return `cannot create a user+mount namespace here (unshare -Urm: ${result.error?.message ?? result.stderr.trim()})`;
  if (result.stdout.trim() !== "EXDEV") return `a rename across the two bind mounts did not fail with EXDEV (${result.stdout.trim()})`;
  return undefined;
}
const skipReason = probe();

let child: ChildProcess | undefined;
let url = "";

beforeAll(async () => {
  if (skipReason) return;
  child = spawn(
    "unshare",
    inNamespace([process.execPath, AGENT_MAIN, "--port", "0", "--log-level", "warn", "--root", root, "--data-dir", data, "--token", "t"]),
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let err = "";
  child.stderr!.on("data", (d) => (err += d));
  url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child!.stdout!.on("data", (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child!.on("exit", (code) => reject(new Error(`agent exited with ${code}: ${err}`)));
  });
});

afterAll(async () => {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child!.once("exit", r));
  child.kill("SIGTERM");
  await exited;
});

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe.skipIf(skipReason)(`multipart complete across two mounts of one filesystem${skipReason ? ` (skipped: ${skipReason})` : ""}`, () => {
  it("parts written in place in the data dir complete by copy into a temp file beside the destination, fsync, rename", async () => {
    writeFileSync(join(rootSource, "big.bin"), "the old content");
    const api = agentClient(url, "t");
    const uploadId = await api.initiate("/big.bin");
    const parts = [randomBytes(5 * 1024 * 1024), randomBytes(5 * 1024 * 1024), randomBytes(1234)];
    const listed = [];
    // One at a time: once part 1 fixed the stride, parts 2 and 3 go straight into the data file (the rename path).
    for (const [i, part] of parts.entries()) {
      const res = await api.part(uploadId, i + 1, part);
      expect(res.status).toBe(200);
      listed.push({ partNumber: i + 1, etag: res.body.etag as string });
    }
    const done = await api.complete(uploadId, listed);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ path: "/big.bin", size: 10 * 1024 * 1024 + 1234 });
    expect(sha(readFileSync(join(rootSource, "big.bin")))).toBe(sha(Buffer.concat(parts)));
    // no temp file left beside the destination, no parts left in the data dir
    expect(readdirSync(rootSource)).toEqual(["big.bin"]);
    expect(readdirSync(join(dataSource, "uploads"))).toEqual([]);
  });

  it("an SDK write over 5 MiB (parts in parallel, assembled by copying) replaces the old file whole", async () => {
    const sandbox = await sandboxAt(url, "cross-mount", { apiKey: "t" });
    const bytes = randomBytes(12 * 1024 * 1024 + 777);
    const result = await sandbox.fs.writeBinary("/big.bin", bytes);
    expect(result).toMatchObject({ path: "/big.bin", size: bytes.length, etag: expect.stringMatching(/-3$/) });
    expect(sha(readFileSync(join(rootSource, "big.bin")))).toBe(sha(bytes));
    expect(readdirSync(rootSource)).toEqual(["big.bin"]);
  });

  it("a string write over 5 MiB to a new directory completes too", async () => {
    const sandbox = await sandboxAt(url, "cross-mount", { apiKey: "t" });
    const text = "x".repeat(6 * 1024 * 1024 + 3);
    await sandbox.fs.write("/dir/text.txt", text);
    expect(readFileSync(join(rootSource, "dir/text.txt"), "utf8")).toBe(text);
  });
});
