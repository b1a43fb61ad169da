import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BUSYBOX_USER_TOOLS } from "../../../simulator/images/busybox-users.js";
import { bwrapPath } from "../../../simulator/launcher/index.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * The BusyBox-compatible adduser/addgroup/deluser/delgroup the hub images
 * carry, run here against a copy of this machine's /etc (bubblewrap binds it
 * over /etc; as a normal user, in a user namespace as its root), with the
 * host's shadow tools. The hub image check (hub-commands.test.ts) runs them in
 * a real sandbox of each image.
 */
const asRoot = process.getuid?.() === 0;
const hasShadow = spawnSync("sh", ["-c", "command -v useradd && command -v gpasswd"], { stdio: "ignore" }).status === 0;

function unavailable(): string {
  const bwrap = bwrapPath();
  if (!bwrap) return " (skipped: bubblewrap is not installed)";
  if (!hasShadow) return " (skipped: shadow's useradd/gpasswd are not installed here: apt-get install passwd)";
  const probe = spawnSync(bwrap, ["--dev-bind", "/", "/", ...(asRoot ? [] : ["--unshare-user", "--uid", "0", "--gid", "0"]), "true"]);
  return probe.status === 0 ? "" : ` (skipped: bubblewrap cannot run here: ${String(probe.stderr).trim()})`;
}
const skip = unavailable();

interface Box {
  root: string;
  run(script: string): { code: number; out: string; err: string };
  passwd(): string;
  group(): string;
}

function box(): Box {
  const root = trackedTempDir("busybox-users-");
  for (const dir of ["etc", "home", "sbin"]) mkdirSync(join(root, dir));
  for (const f of ["passwd", "group", "shadow", "gshadow", "login.defs", "nsswitch.conf"]) {
    try {
      cpSync(join("/etc", f), join(root, "etc", f));
    } catch {
      // shadow, gshadow: root's only; the tools make what they need
    }
  }
  // Only the base system's accounts: ids from 1000 free, as in a fresh image.
  const keep = (file: string) => {
    const path = join(root, "etc", file);
    try {
      const lines = readFileSync(path, "utf8").split("\n");
      writeFileSync(path, lines.filter((l) => Number(l.split(":")[2]) < 1000 || l.split(":")[2] === "65534").join("\n") + "\n");
    } catch {
      /* absent */
    }
  };
  keep("passwd");
  keep("group");
  writeFileSync(join(root, "etc", "shadow"), "");
  writeFileSync(join(root, "etc", "gshadow"), "");
  mkdirSync(join(root, "etc", "skel"));
  writeFileSync(join(root, "etc", "skel", ".profile"), "# skel\n");
  for (const t of BUSYBOX_USER_TOOLS) writeFileSync(join(root, "sbin", t.path.split("/").pop()!), t.content, { mode: 0o755 });
  const bwrap = bwrapPath()!;
  return {
    root,
    run(script) {
      const r = spawnSync(
        bwrap,
        [
          "--dev-bind",
          "/",
          "/",
          "--bind",
          join(root, "etc"),
          "/etc",
          "--bind",
          join(root, "home"),
          "/home",
          "--bind",
          join(root, "sbin"),
          "/usr/local/sbin",
          ...(asRoot ? [] : ["--unshare-user", "--uid", "0", "--gid", "0"]),
          "env",
          "PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
          "SHELL=/bin/sh",
          "sh",
          "-c",
          script,
        ],
        { encoding: "utf8" },
      );
      return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
    },
    passwd: () => readFileSync(join(root, "etc", "passwd"), "utf8"),
    group: () => readFileSync(join(root, "etc", "group"), "utf8"),
  };
}

describe.skipIf(skip !== "")(`BusyBox's adduser and addgroup on Debian's shadow tools${skip}`, () => {
  it("adduser -D -u 1234 bob: the user, its own group of the same id, a 2755 home from /etc/skel", () => {
    const b = box();
    const r = b.run("adduser -D -u 1234 bob");
    expect(r.err).toEqual(asRoot ? "" : expect.stringMatching(/^adduser: \/home\/bob: /));
    expect(r.code).toBe(0);
    expect(b.passwd()).toContain("bob:x:1234:1234:Linux User,,,:/home/bob:/bin/sh\n");
    expect(b.group()).toMatch(/^bob:x:1234:$/m);
    expect(readFileSync(join(b.root, "home/bob/.profile"), "utf8")).toBe("# skel\n");
    if (asRoot) {
      const st = statSync(join(b.root, "home/bob"));
      expect([st.uid, st.gid, st.mode & 0o7777]).toEqual([1234, 1234, 0o2755]);
    }
    // The shadow entry is locked ("!"), as BusyBox writes it.
    expect(readFileSync(join(b.root, "etc/shadow"), "utf8")).toMatch(/^bob:!/m);
  });

  it("picks the first free id from 1000 (system users from 100, shell nologin, group nogroup), honours -h -g -s -H", () => {
    const b = box();
    expect(b.run("adduser -D alice && adduser -D carol && adduser -S svc && adduser -D -H -h /srv/x -g 'X Y' -s /bin/bash dave").code).toBe(0);
    expect(b.passwd()).toMatch(/^alice:x:1000:1000:/m);
    expect(b.passwd()).toMatch(/^carol:x:1001:1001:/m);
    expect(b.passwd()).toMatch(/^svc:x:1\d\d:65534:Linux User,,,:\/home\/svc:\/sbin\/nologin$/m);
    expect(b.passwd()).toMatch(/^dave:x:1002:1002:X Y:\/srv\/x:\/bin\/bash$/m);
  });

  it("-G puts the user in an existing group; two names add a user to a group (once)", () => {
    const b = box();
    const r = b.run("addgroup -g 2000 crew && adduser -D -G crew erin && adduser -D frank && adduser frank crew && adduser frank crew");
    expect(r.code, r.err).toBe(0);
    expect(b.passwd()).toMatch(/^erin:x:1000:2000:/m);
    expect(b.group()).toMatch(/^crew:x:2000:erin,frank$/m);
    expect(b.group()).not.toMatch(/^erin:/m);
  });

  it("says what BusyBox says, exit 1, for a taken name or gid, an unknown group or user, a bad name or id", () => {
    const b = box();
    expect(b.run("adduser -D -u 1234 bob").code).toBe(0);
    const cases: [string, string][] = [
      ["adduser -D bob", "adduser: user 'bob' in use"],
      ["adduser -D -G nosuch gina", "adduser: unknown group nosuch"],
      ["adduser -D -- -x", "adduser: illegal character with code 45 at position 0"],
      ["adduser -D 'a b'", "adduser: illegal character with code 32 at position 1"],
      ["adduser -D -u abc hal", "adduser: invalid number 'abc'"],
      ["addgroup bob", "addgroup: group 'bob' in use"],
      ["addgroup -g 1234 other", "addgroup: gid '1234' in use"],
      ["addgroup nobodyhere bob", "addgroup: unknown user nobodyhere"],
      ["addgroup bob nosuch", "addgroup: unknown group nosuch"],
      ["delgroup bob", "delgroup: 'bob' still has 'bob' as their primary group!"],
      ["deluser ghost", "deluser: unknown user ghost"],
    ];
    for (const [cmd, msg] of cases) {
      const r = b.run(cmd);
      expect([r.code, r.err.trim()], cmd).toEqual([1, msg]);
    }
    expect(b.run("adduser").err).toMatch(/^Usage: adduser \[OPTIONS\] USER \[GROUP\]/);
    expect(b.run("adduser").code).toBe(1);
  });

  it("deluser removes the user and its own group; deluser USER GROUP and delgroup take a member out", () => {
    const b = box();
    expect(b.run("addgroup crew && adduser -D ivy && adduser ivy crew && deluser ivy crew").code).toBe(0);
    expect(b.group()).toMatch(/^crew:x:\d+:$/m);
    expect(b.run("adduser ivy crew && delgroup ivy crew && deluser ivy && delgroup crew").code).toBe(0);
    expect(b.passwd()).not.toMatch(/^ivy:/m);
    expect(b.group()).not.toMatch(/^(ivy|crew):/m);
  });

  it("refuses to run as a user other than root", () => {
    if (!asRoot) return; // the namespace's root is root here
    const dir = trackedTempDir("busybox-users-");
    chmodSync(dir, 0o755);
    writeFileSync(join(dir, "adduser"), BUSYBOX_USER_TOOLS[0]!.content, { mode: 0o755 });
    const out = spawnSync("setpriv", ["--reuid", "65534", "--regid", "65534", "--clear-groups", "sh", join(dir, "adduser"), "-D", "x"], {
      encoding: "utf8",
    });
    expect([out.status, out.stderr.trim()]).toEqual([1, "adduser: permission denied (are you root?)"]);
  });
});
