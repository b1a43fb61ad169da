import { spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { agentMainReadableBy, spawnAgent, type AgentProcess } from "../../helpers/agent-process.js";
import { tempDir } from "../../helpers/agent.js";

/**
 * The agent as an unprivileged user, root of its own user and mount
 * namespaces (what `unshare --user --map-root-user --mount` gives, as the
 * bwrap launcher's first stage does): `auto` picks the bind backend there,
 * and the held-descriptor mounts (/proc/self/fd/3 handed to mount(8)) work
 * the same. Its mounts live in its private namespace, so they are checked
 * through its API and through the files they lead to on the host.
 */
const NOBODY = 65534;
const UNSHARE = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"];
/** Run as root (the main CI pass), the agent first drops to nobody; run as a normal user, it already is one. */
const AS_ROOT = process.getuid?.() === 0;
const LAUNCHER = AS_ROOT ? ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", ...UNSHARE] : UNSHARE;

function probe(): string {
  if (process.platform !== "linux") return `user namespaces need Linux, this is ${process.platform}`;
  const tried = spawnSync(LAUNCHER[0]!, [...LAUNCHER.slice(1), "true"], { encoding: "utf8" });
  if (tried.error) return `${LAUNCHER[0]} could not run: ${tried.error.message}`;
  if (tried.status !== 0) return `unprivileged user namespaces are not available: ${tried.stderr.trim()}`;
  return "";
}
const SKIP = probe();
if (SKIP) console.warn(`[drives tests] SKIPPING the user-namespace test: ${SKIP}`);

let agent: AgentProcess | undefined;
// As root the agent runs as nobody, who may not reach a checkout under a mode-700 directory: a copy it can read.
const readable = SKIP === "" && AS_ROOT ? agentMainReadableBy(NOBODY) : undefined;
afterAll(async () => {
  agent?.child.kill("SIGKILL");
  await agent?.exited;
  readable?.cleanup();
});

async function call(method: string, url: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe.skipIf(SKIP !== "")(`drives as root of a user namespace${SKIP ? ` [SKIPPED: ${SKIP}]` : ""}`, () => {
  it("bind-mounts through held descriptors, and unmounts", async () => {
    const base = tempDir("sandbox-kit-userns-");
    const [root, data] = [join(base, "root"), join(base, "data")];
    for (const dir of [base, root, data]) {
      mkdirSync(dir, { recursive: true });
      if (AS_ROOT) chownSync(dir, NOBODY, NOBODY);
    }
    agent = await spawnAgent(["--root", root, "--data-dir", data], {}, { launcher: LAUNCHER, main: readable?.main });
    const mounted = await call("POST", `${agent.url}/drives/mount`, { driveName: "shared", mountPath: "/mnt/shared", readOnly: false });
    expect(mounted).toMatchObject({ status: 200, body: { backend: "bind", mountPath: "/mnt/shared" } });
    // A write under the mount point lands in the drive's directory (the mount is the agent's alone).
    expect((await call("PUT", `${agent.url}/filesystem/mnt/shared/hello.txt`, { content: "through the mount" })).status).toBe(200);
    expect(readFileSync(join(data, "drives", "shared", "hello.txt"), "utf8")).toBe("through the mount");
    expect(existsSync(join(root, "mnt", "shared", "hello.txt"))).toBe(false);

    const ro = await call("POST", `${agent.url}/drives/mount`, { driveName: "shared", mountPath: "/mnt/ro", readOnly: true });
    expect(ro).toMatchObject({ status: 200, body: { readOnly: true } });
    expect((await call("PUT", `${agent.url}/filesystem/mnt/ro/x.txt`, { content: "x" })).status).toBeGreaterThanOrEqual(400);

    for (const path of ["mnt/shared", "mnt/ro"]) expect((await call("DELETE", `${agent.url}/drives/mount/${path}`)).status).toBe(200);
    expect((await call("GET", `${agent.url}/drives/mount`)).body).toEqual({ mounts: [] });
    expect((await call("PUT", `${agent.url}/filesystem/mnt/shared/after.txt`, { content: "x" })).status).toBe(200);
    expect(existsSync(join(data, "drives", "shared", "after.txt"))).toBe(false);
  }, 60_000);
});
