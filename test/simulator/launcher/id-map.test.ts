import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  describeIdMapping,
  firstRangeOf,
  freeStart,
  parseSubordinateIds,
  resolveIdMapping,
  rootRange,
  unshareIdArgs,
  type IdFiles,
} from "../../../simulator/launcher/id-map.js";
import { tempBase } from "./helpers.js";

/** The subordinate-id logic on files of a test's own (the real /etc/subuid is used by the sandboxes' tests). */
function files(subuid = "", subgid = subuid): IdFiles {
  const dir = tempBase("id-map-");
  writeFileSync(join(dir, "subuid"), subuid);
  writeFileSync(join(dir, "subgid"), subgid);
  return { subuid: join(dir, "subuid"), subgid: join(dir, "subgid"), leases: join(dir, "leases") };
}
const helpers = { newuidmap: "/usr/bin/newuidmap", newgidmap: "/usr/bin/newgidmap" };

describe("subordinate ids", () => {
  it("parses owner:start:count lines, skipping comments, blanks and empty blocks", () => {
    expect(parseSubordinateIds("alice:100000:65536\n# c\n\n1001:200000:10\nbad line\nzero:5:0\n")).toEqual([
      { owner: "alice", start: 100000, count: 65536 },
      { owner: "1001", start: 200000, count: 10 },
    ]);
  });

  it("a user's first block, by name or uid, at most 65536 ids", () => {
    const entries = parseSubordinateIds("bob:1:5\n1001:300000:1000000\nalice:100000:65536\n");
    expect(firstRangeOf(entries, { name: "alice", uid: 1001 })).toEqual({ start: 300000, count: 65536 });
    expect(firstRangeOf(entries, { name: "carol", uid: 1002 })).toBeUndefined();
  });

  it("a new block starts past every block handed out, on a 65536 boundary, never below 100000", () => {
    expect(freeStart([])).toBe(131072);
    expect(freeStart(parseSubordinateIds("a:100000:65536\nb:400000:10\n"))).toBe(458752);
  });

  it("a normal user without subordinate ids keeps a single id, and is told how to get more", () => {
    const ids = resolveIdMapping({ helpers, files: files("other:100000:65536\n"), uid: 1005, userName: "dave" });
    expect(ids).toMatchObject({ kind: "single" });
    expect(describeIdMapping(ids)).toMatch(/^one user id only .*usermod --add-subuids 100000-165535 --add-subgids 100000-165535 dave$/);
    expect(unshareIdArgs(ids)).toEqual(["--user", "--map-root-user"]);
    expect(resolveIdMapping({ helpers: {}, files: files("dave:100000:65536\n"), uid: 1005, userName: "dave" })).toMatchObject({
      kind: "single",
      reason: expect.stringMatching(/apt-get install -y uidmap/),
    });
  });

  it("a normal user's block maps ids 1.. of every sandbox (0 stays the user)", () => {
    const ids = resolveIdMapping({ helpers, files: files("dave:200000:65536\n", "dave:300000:70000\n"), uid: 1005, userName: "dave" });
    expect(unshareIdArgs(ids)).toEqual(["--user", "--map-root-user", "--map-users=200000,1,65536", "--map-groups=300000,1,65536"]);
  });
});

describe("root's block per simulator", () => {
  it("each simulator directory gets a block of its own, added to both files; the same directory gets the same block again", () => {
    const f = files("alice:100000:65536\n");
    const a = tempBase("sim-a-");
    const b = tempBase("sim-b-");
    const first = rootRange(a, f);
    const second = rootRange(b, f);
    expect(first).toEqual({ start: 196608, count: 65536 });
    expect(second.start).toBe(262144);
    expect(rootRange(a, f)).toEqual(first); // a restart keeps its sandboxes' owners
    for (const file of [f.subuid, f.subgid]) expect(readFileSync(file, "utf8")).toBe("alice:100000:65536\nroot:196608:65536\nroot:262144:65536\n");
  });

  it("a block whose simulator is gone (directory removed, process dead) is taken over, not a new one", async () => {
    const f = files();
    const gone = tempBase("sim-gone-");
    const taken = rootRange(gone, f);
    rmSync(gone, { recursive: true });
    // The lease names a dead process (a child that has exited).
    const dead = await new Promise<number>((resolve) => {
      const child = spawn("true");
      child.once("exit", () => resolve(child.pid!));
    });
    writeFileSync(join(f.leases, String(taken.start)), JSON.stringify({ owner: gone, pid: dead }));
    expect(rootRange(tempBase("sim-next-"), f)).toEqual(taken);
    expect(readFileSync(f.subuid, "utf8")).toBe(`root:${taken.start}:65536\n`);
  });

  it("a live simulator's block is never taken, even with its directory gone", () => {
    const f = files();
    const live = tempBase("sim-live-");
    const held = rootRange(live, f);
    rmSync(live, { recursive: true }); // this process (alive) still holds it
    expect(rootRange(tempBase("sim-other-"), f).start).not.toBe(held.start);
  });

  it("a lock left by a dead allocator does not block the next", () => {
    const f = files();
    mkdirSync(f.leases, { recursive: true });
    writeFileSync(join(f.leases, ".lock"), "999999999");
    expect(rootRange(tempBase("sim-lock-"), f).count).toBe(65536);
  });
});
