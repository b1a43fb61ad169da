import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { mayMount } from "../../../sandbox-agent/drives/backends/index.js";
import { tempDir as makeTempDir } from "../../helpers/agent.js";

const made: string[] = [];
function tempDir(prefix: string): string {
  const dir = makeTempDir(prefix);
  made.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});
import { expandTemplate, parseCommandTemplate } from "../../../sandbox-agent/drives/command-template.js";
import { KeyedLock } from "../../../sandbox-agent/drives/keyed-lock.js";
import { parseMountInfo, readMountTable, topMountAt, unescapeMountField } from "../../../sandbox-agent/drives/mount-table.js";

const SAMPLE = [
  "22 27 0:21 / /proc rw,relatime - proc proc rw",
  "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
  "40 27 253:1 /drives/with\\040space/sub /srv/my\\040mount\\011tab ro,relatime shared:5 master:2 - ext4 /dev/vda1 rw",
  "41 27 0:50 / /srv/back\\134slash rw,nosuid - fuse.rclone remote:\\040x rw,user_id=0",
  "garbage line",
  "",
  "42 27 0:51 / /mnt/stack rw - tmpfs tmpfs rw",
  "43 42 0:52 / /mnt/stack rw - tmpfs other rw",
].join("\n");

describe("parseMountInfo", () => {
  const table = parseMountInfo(SAMPLE);

  it("reads every well-formed line and skips the rest", () => {
    expect(table.map((m) => m.mountId)).toEqual([22, 36, 40, 41, 42, 43]);
  });

  it("splits fields around optional fields and the separator", () => {
    const m = table.find((e) => e.mountId === 36)!;
    expect(m).toMatchObject({ parentId: 35, device: "98:0", root: "/mnt1", mountPoint: "/mnt/parent", fsType: "ext3", source: "/dev/root", readOnly: false });
    expect(m.superOptions).toEqual(["rw", "errors=continue"]);
  });

  it("decodes octal escapes in paths and source", () => {
    const m = table.find((e) => e.mountId === 40)!;
    expect(m.root).toBe("/drives/with space/sub");
    expect(m.mountPoint).toBe("/srv/my mount\ttab");
    expect(m.readOnly).toBe(true);
    expect(table.find((e) => e.mountId === 41)).toMatchObject({ mountPoint: "/srv/back\\slash", source: "remote: x", fsType: "fuse.rclone" });
    expect(unescapeMountField("a\\012b")).toBe("a\nb");
  });

  it("topMountAt picks the last mount stacked on a path", () => {
    expect(topMountAt(table, "/mnt/stack")?.mountId).toBe(43);
    expect(topMountAt(table, "/mnt/none")).toBeUndefined();
  });
});

describe("command templates", () => {
  it("splits words and keeps values as single literal arguments", () => {
    const argv = parseCommandTemplate("rclone mount remote:{driveName}{drivePath} {mountPath} --read-only={readOnly}");
    expect(expandTemplate(argv, { driveName: "d", drivePath: "/a b", mountPath: "/mnt/x; rm -rf /", readOnly: "true" })).toEqual([
      "rclone",
      "mount",
      "remote:d/a b",
      "/mnt/x; rm -rf /",
      "--read-only=true",
    ]);
  });
  it("accepts a JSON array for arguments with spaces", () => {
    expect(parseCommandTemplate('["sh", "/opt/my script.sh", "{mountPath}"]')).toEqual(["sh", "/opt/my script.sh", "{mountPath}"]);
  });
  it.each([
    ["", /empty/],
    ["mount {bogus}", /unknown placeholder \{bogus\}/],
    ["[1,2]", /array of strings/],
    ["[oops", /JSON/],
  ])("refuses %j", (raw, why) => {
    expect(() => parseCommandTemplate(raw)).toThrow(why);
  });
});

describe("KeyedLock", () => {
  it("serialises one key and lets other keys run", async () => {
    const lock = new KeyedLock();
    const events: string[] = [];
    let releaseFirst!: () => void;
    const first = lock.run("/a", async () => {
      events.push("a1 start");
      await new Promise<void>((r) => (releaseFirst = r));
      events.push("a1 end");
    });
    const second = lock.run("/a", async () => void events.push("a2"));
    await lock.run("/b", async () => void events.push("b"));
    expect(events).toEqual(["a1 start", "b"]);
    releaseFirst();
    await Promise.all([first, second]);
    expect(events).toEqual(["a1 start", "b", "a1 end", "a2"]);
    expect(lock.size).toBe(0);
  });
  it("releases the key when the holder throws", async () => {
    const lock = new KeyedLock();
    await expect(
      lock.run("/a", async () => {
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    await expect(lock.run("/a", async () => 42)).resolves.toBe(42);
  });
});

describe("readMountTable", () => {
  it("is empty where there is no procfs, and reads a real table", async () => {
    expect(await readMountTable("/nonexistent/mountinfo")).toEqual([]);
    const dir = tempDir("drives-mountinfo-");
    writeFileSync(join(dir, "mountinfo"), SAMPLE);
    expect((await readMountTable(join(dir, "mountinfo"))).map((m) => m.mountPoint)).toContain("/srv/my mount\ttab");
  });
});

describe("mayMount (the auto backend's choice)", () => {
  function status(capEff: string): string {
    const file = join(tempDir("drives-status-"), "status");
    writeFileSync(file, `Name:\tnode\nCapInh:\t0000000000000000\nCapEff:\t${capEff}\nCapBnd:\t000001ffffffffff\n`);
    return file;
  }
  it("needs CAP_SYS_ADMIN (bit 21) in the effective set, and root", () => {
    expect(mayMount(status("0000000000000000"))).toBe(false);
    expect(mayMount(status("00000000001fffff"))).toBe(false); // bits 0-20 only
    expect(mayMount(status("0000000000200000"))).toBe(process.getuid?.() === 0);
    expect(mayMount("/nonexistent/status")).toBe(false);
  });
});
