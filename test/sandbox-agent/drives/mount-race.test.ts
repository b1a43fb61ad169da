import { mkdirSync, readdirSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import request from "supertest";
import { afterAll, describe, expect, it } from "vitest";
import { startTestAgent, tempDir, type TestAgent } from "../../helpers/agent.js";
import { startSwapper } from "../../helpers/swapper.js";
import { MOUNT, SKIP_REASON, mountTable, unmountUnder } from "./helpers.js";

/**
 * Drive mounts: a process in the sandbox keeps swapping the
 * mount point's parent for a symlink to the outside while drives are mounted
 * and unmounted there. mount(8) given the path string followed the link and
 * bind-mounted outside --root (and the agent, not finding its mount, answered
 * 500 and left it there). Mounting onto the held mount point lands inside the
 * root or not at all; whatever fails leaves nothing mounted.
 */
const POINTS = 6;
const CLIENTS = 3;
const agents: TestAgent[] = [];
const outsides: string[] = [];
afterAll(async () => {
  for (const a of agents) unmountUnder(dirname(a.root));
  for (const dir of outsides) unmountUnder(dir);
  for (const a of agents) await a.stop();
});

/** Runs the swapper on `<root>/p` (real directory / link to the outside) while `request` runs in CLIENTS loops; the statuses seen. */
async function race(a: TestAgent, outside: string, request: (client: number, i: number) => Promise<number>): Promise<Record<number, number>> {
  symlinkSync(outside, join(a.root, "link"));
  const swapper = startSwapper([{ dir: join(a.root, "p"), real: join(a.root, "real"), link: join(a.root, "link") }], 2500);
  const statuses: Record<number, number> = {};
  const client = async (c: number) => {
    for (let i = 0; swapper.running; i++) {
      const status = await request(c, i);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  await swapper.done;
  return statuses;
}

describe.skipIf(!MOUNT.ok)(`a mount point's parent swapped for a symlink during mounts${SKIP_REASON}`, () => {
  it("never mounts (or creates a mount point) outside --root, and leaves no stray mount", async () => {
    const a = await startTestAgent({ driveBackend: "bind" });
    agents.push(a);
    const outside = tempDir("sandbox-kit-outside-");
    outsides.push(outside);
    const points = Array.from({ length: POINTS }, (_, i) => `m-${i}`);
    for (const name of points) {
      mkdirSync(join(a.root, "real", name), { recursive: true });
      mkdirSync(join(outside, name)); // so a mount through the link finds a directory to land on
    }
    const statuses = await race(a, outside, async (c, i) => {
      // Each client its own mount points, so one client's unmount never meets another's mount.
      const mountPath = `/p/${points[c + CLIENTS * (i % (POINTS / CLIENTS))]}`;
      const mounted = await request(a.url).post("/drives/mount").send({ driveName: "d", mountPath });
      if (mounted.status === 200) await request(a.url).delete(`/drives/mount${mountPath}`); // may meet the parent swapped away
      return mounted.status;
    });

    expect(Object.values(statuses).reduce((x, y) => x + y, 0)).toBeGreaterThan(3);
    // Nothing was mounted on, or created in, the outside directory.
    expect(mountTable().filter((m) => m.mountPoint === outside || m.mountPoint.startsWith(`${outside}/`))).toEqual([]);
    expect(readdirSync(outside).sort()).toEqual(points);
    // A swap answers 400 (the path led outside) or 409 (it changed under the request), never 500.
    expect(statuses[500] ?? 0).toBe(0);

    // However the directories ended up, every mount under the root is one the agent tracks (one moved away
    // with its parent included) and unmounts where it is now: then nothing is left mounted there.
    const underRoot = () => mountTable().filter((m) => m.mountPoint.startsWith(`${a.root}/`));
    for (const m of underRoot())
      await request(a.url)
        .delete(`/drives/mount${m.mountPoint.slice(a.root.length)}?force=true`)
        .expect(200);
    expect(underRoot()).toEqual([]);
  }, 60_000);
});

describe("a mount point's parent swapped for a symlink during symlink-backend mounts (no privileges needed)", () => {
  it("never creates the drive's link outside --root", async () => {
    const a = await startTestAgent({ driveBackend: "symlink" });
    agents.push(a);
    const outside = tempDir("sandbox-kit-outside-");
    outsides.push(outside);
    mkdirSync(join(a.root, "real"));
    const statuses = await race(a, outside, async (c, i) => {
      const mountPath = `/p/s-${c}-${i % 2}`;
      // A deep drivePath: more steps between the mount point's check and the link's creation.
      const mounted = await request(a.url).post("/drives/mount").send({ driveName: "d", mountPath, drivePath: "/a/b/c/d/e/f/g/h/i/j/k/l" });
      if (mounted.status === 200) await request(a.url).delete(`/drives/mount${mountPath}`);
      return mounted.status;
    });
    expect(Object.values(statuses).reduce((x, y) => x + y, 0)).toBeGreaterThan(3);
    expect(readdirSync(outside)).toEqual([]);
    expect(statuses[500] ?? 0).toBe(0);
  }, 60_000);
});
