import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { linkCopy } from "../../../simulator/images/base-copy.js";
import { applyLayer, LayerError, resolveInRoot } from "../../../simulator/images/layer.js";
import { readTar, TarFormatError } from "../../../simulator/images/tar-reader.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { chunks, tarOf } from "./tar-writer.js";

let root: string;
let outside: string;
beforeEach(() => {
  const base = trackedTempDir("layer-");
  root = join(base, "rootfs");
  outside = join(base, "outside");
  mkdirSync(root);
  mkdirSync(outside);
});

const apply = (entries: Parameters<typeof tarOf>[0]) => applyLayer(root, chunks(tarOf(entries)));
const read = (path: string) => readFileSync(join(root, path), "utf8");

describe("applyLayer", () => {
  it("unpacks files, directories, symlinks and hard links with their modes", async () => {
    const stats = await apply([
      { name: "usr/", type: "dir" },
      { name: "usr/bin/", type: "dir" },
      { name: "usr/bin/tool", content: "#!/bin/sh\necho hi\n", mode: 0o755 },
      { name: "bin", type: "symlink", link: "usr/bin" },
      { name: "usr/bin/tool2", type: "hardlink", link: "usr/bin/tool" },
      { name: "etc/os-release", content: "ID=test\n" },
      { name: "dev/null-ish", type: "fifo" },
    ]);
    expect(read("usr/bin/tool")).toContain("echo hi");
    expect(lstatSync(join(root, "usr/bin/tool")).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(root, "bin"))).toBe("usr/bin");
    expect(lstatSync(join(root, "usr/bin/tool2")).ino).toBe(lstatSync(join(root, "usr/bin/tool")).ino);
    expect(read("etc/os-release")).toBe("ID=test\n");
    expect(existsSync(join(root, "dev/null-ish"))).toBe(false);
    expect(stats).toMatchObject({ files: 2, skipped: 1 });
  });

  it("a whiteout deletes what a lower layer put there, an opaque directory hides all of it but this layer's own entries", async () => {
    await apply([
      { name: "etc/keep", content: "1" },
      { name: "etc/gone", content: "2" },
      { name: "opt/app/old1", content: "a" },
      { name: "opt/app/sub/old2", content: "b" },
    ]);
    await apply([{ name: "etc/.wh.gone" }, { name: "opt/app/new", content: "n" }, { name: "opt/app/.wh..wh..opq" }]);
    expect(read("etc/keep")).toBe("1");
    expect(existsSync(join(root, "etc/gone"))).toBe(false);
    expect(existsSync(join(root, "opt/app/old1"))).toBe(false);
    expect(existsSync(join(root, "opt/app/sub"))).toBe(false);
    expect(read("opt/app/new")).toBe("n");
    expect(existsSync(join(root, "opt/app/.wh..wh..opq"))).toBe(false);
  });

  it("a later layer replaces a file by a directory and a directory by a file", async () => {
    await apply([
      { name: "a", content: "file" },
      { name: "b/inner", content: "x" },
    ]);
    await apply([
      { name: "a/child", content: "now a dir" },
      { name: "b", content: "now a file" },
    ]);
    expect(read("a/child")).toBe("now a dir");
    expect(read("b")).toBe("now a file");
  });

  it('refuses an entry climbing out with ".." and writes nothing outside', async () => {
    await expect(apply([{ name: "../outside/evil", content: "x" }])).rejects.toBeInstanceOf(LayerError);
    await expect(apply([{ name: "ok/../../outside/evil", content: "x" }])).rejects.toThrow(/\.\./);
    await expect(apply([{ name: "h", type: "hardlink", link: "../outside/secret" }])).rejects.toThrow(/\.\./);
    expect(existsSync(join(outside, "evil"))).toBe(false);
  });

  it("follows symlinks inside the root only: an absolute or climbing link in a lower layer never leads out", async () => {
    writeFileSync(join(outside, "passwd"), "host file");
    await apply([
      { name: "abs", type: "symlink", link: outside },
      { name: "rel", type: "symlink", link: "../../../../../../.." + outside },
    ]);
    await apply([
      { name: "abs/passwd", content: "image file" },
      { name: "rel/x", content: "y" },
    ]);
    expect(readFileSync(join(outside, "passwd"), "utf8")).toBe("host file");
    expect(existsSync(join(outside, "x"))).toBe(false);
    // Resolved as the sandbox sees them: under root.
    expect(readFileSync(join(root, outside, "passwd"), "utf8")).toBe("image file");
  });

  it("replaces a symlink that stands where an entry goes, never writing through it", async () => {
    writeFileSync(join(outside, "target"), "host");
    symlinkSync(join(outside, "target"), join(root, "file"));
    await apply([{ name: "file", content: "image" }]);
    expect(readFileSync(join(outside, "target"), "utf8")).toBe("host");
    expect(lstatSync(join(root, "file")).isSymbolicLink()).toBe(false);
    expect(read("file")).toBe("image");
  });

  it("reads GNU long names across small chunks", async () => {
    const long = `deep/${"d".repeat(120)}/file.txt`;
    await apply([{ name: long, content: "long" }]);
    expect(read(long)).toBe("long");
  });

  it("rejects a corrupt archive", async () => {
    const tar = tarOf([{ name: "a", content: "x" }]);
    tar[0] = tar[0]! ^ 0xff;
    await expect(applyLayer(root, chunks(tar))).rejects.toBeInstanceOf(TarFormatError);
    await expect(readTar(chunks(tarOf([{ name: "a", content: "x".repeat(2000) }]).subarray(0, 1024)), { entry() {}, data() {}, end() {} })).rejects.toThrow(
      /truncated/,
    );
  });
});

describe("resolveInRoot", () => {
  it("clamps .. and absolute links at the root", () => {
    mkdirSync(join(root, "usr/lib"), { recursive: true });
    symlinkSync("/usr/lib", join(root, "lib"));
    expect(resolveInRoot(root, ["lib", "x"], true)).toBe(join(root, "usr/lib/x"));
    expect(resolveInRoot(root, ["..", "..", "etc"], true)).toBe(join(root, "etc"));
  });
});

describe("a layer applied over a hard-linked copy of a base image (a template over its base)", () => {
  /** The base image's tree, and what its files are: content, inode and mode. */
  const makeBase = async (dir: string) => {
    await applyLayer(
      dir,
      chunks(
        tarOf([
          { name: "etc/", type: "dir" },
          { name: "etc/changed", content: "base\n" },
          { name: "etc/chmodded", content: "mode\n", mode: 0o644 },
          { name: "etc/deleted", content: "gone in the template\n" },
          { name: "etc/linked", content: "link target\n" },
          { name: "opt/app/", type: "dir", mode: 0o755 },
          { name: "opt/app/old", content: "hidden in the template\n" },
          { name: "bin", type: "symlink", link: "usr/bin" },
        ]),
      ),
    );
  };
  const facts = (dir: string) =>
    ["etc/changed", "etc/chmodded", "etc/deleted", "etc/linked", "opt/app/old"].map((path) => {
      const st = lstatSync(join(dir, path));
      return { path, content: readFileSync(join(dir, path), "utf8"), ino: st.ino, mode: st.mode };
    });

  it.each(["oci", "overlay"] as const)(
    "the %s layer's changes, deletions and opaque directories reach the copy only: the base's files keep their content, inode and mode",
    async (whiteouts) => {
      const base = join(root, "..", "base");
      mkdirSync(base);
      await makeBase(base);
      const before = facts(base);
      await linkCopy(base, root);
      expect(lstatSync(join(root, "etc/changed")).ino).toBe(lstatSync(join(base, "etc/changed")).ino); // hard-linked: no data copied

      const deleted: Parameters<typeof tarOf>[0] =
        whiteouts === "oci" ? [{ name: "etc/.wh.deleted" }, { name: "opt/app/.wh..wh..opq" }] : [{ name: "etc/deleted", type: "char", dev: [0, 0] }];
      const opaque: Parameters<typeof tarOf>[0] =
        whiteouts === "overlay"
          ? [{ name: "opt/app/", type: "dir", mode: 0o700, xattrs: { "trusted.overlay.opaque": "y" } }]
          : [{ name: "opt/app/", type: "dir", mode: 0o700 }];
      await applyLayer(
        root,
        chunks(
          tarOf([
            { name: "etc/changed", content: "template\n" },
            { name: "etc/chmodded", content: "mode\n", mode: 0o600 },
            { name: "etc/linked", type: "hardlink", link: "etc/changed" },
            ...deleted,
            ...opaque,
            { name: "opt/app/new", content: "the template's own\n" },
            { name: "bin", type: "symlink", link: "usr/local/bin" },
          ]),
        ),
        { whiteouts },
      );

      expect(read("etc/changed")).toBe("template\n");
      expect(lstatSync(join(root, "etc/chmodded")).mode & 0o777).toBe(0o600);
      expect(read("etc/linked")).toBe("template\n");
      expect(existsSync(join(root, "etc/deleted"))).toBe(false);
      expect(readdirSync(join(root, "opt/app"))).toEqual(["new"]);
      expect(readlinkSync(join(root, "bin"))).toBe("usr/local/bin");
      expect(lstatSync(join(root, "opt/app")).mode & 0o777).toBe(0o700);

      expect(facts(base)).toEqual(before);
      expect(readdirSync(join(base, "opt/app"))).toEqual(["old"]);
      expect(lstatSync(join(base, "opt/app")).mode & 0o777).toBe(0o755);
      expect(readlinkSync(join(base, "bin"))).toBe("usr/bin");
    },
  );

  it("an OCI layer keeps a character device 0/0 and a .wh. name of an overlay layer apart: each format's whiteouts only", async () => {
    await apply([
      { name: "etc/a", content: "1" },
      { name: "etc/b", content: "2" },
    ]);
    await applyLayer(root, chunks(tarOf([{ name: "etc/a", type: "char", dev: [0, 0] }])));
    expect(read("etc/a")).toBe("1"); // OCI: a device, skipped
    await applyLayer(root, chunks(tarOf([{ name: "etc/.wh.b" }])), { whiteouts: "overlay" });
    expect(read("etc/b")).toBe("2"); // overlay: a file of that name
  });
});

/** What overlayfs shows of layers (top first), mounted in a user namespace as the launcher mounts a sandbox's; undefined where the host allows none. */
function overlayView(layers: string[], script: string): string | undefined {
  const mountAt = trackedTempDir("layer-view-");
  try {
    return execFileSync(
      "unshare",
      [
        "--user",
        "--map-root-user",
        "--mount",
        "sh",
        "-c",
        `mount -t overlay overlay -o "lowerdir=$1,userxattr" "$2" && cd "$2" && ${script}`,
        "view",
        layers.join(":"),
        mountAt,
      ],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
    );
  } catch (err) {
    if (/unshare failed|Operation not permitted/.test(String((err as { stderr?: string }).stderr))) return undefined;
    throw err;
  }
}

describe("layers stacked over a base (`below`: a template stored over its base image)", () => {
  const whiteout = (path: string) => {
    const st = lstatSync(join(root, path));
    return st.isCharacterDevice() && st.rdev === 0;
  };

  it("keeps deletions as overlay whiteouts, turns an opaque directory into whiteouts of the base's names, and merges several layers; overlayfs shows the template", async () => {
    const base = join(root, "..", "base");
    mkdirSync(base);
    await applyLayer(
      base,
      chunks(
        tarOf([
          { name: "etc/keep", content: "base\n" },
          { name: "etc/changed", content: "base\n" },
          { name: "etc/deleted", content: "base\n" },
          { name: "opt/app/old1", content: "base\n" },
          { name: "opt/app/old2", content: "base\n" },
          { name: "srv/data/inner", content: "base\n" },
        ]),
      ),
    );
    const stacked = (entries: Parameters<typeof tarOf>[0]) => applyLayer(root, chunks(tarOf(entries)), { whiteouts: "overlay", below: [base] });
    await stacked([
      { name: "etc/", type: "dir" },
      { name: "etc/changed", content: "template\n" },
      { name: "etc/deleted", type: "char", dev: [0, 0] },
      { name: "opt/", type: "dir" },
      { name: "opt/app/", type: "dir", xattrs: { "trusted.overlay.opaque": "y" } },
      { name: "opt/app/old2", content: "template\n" },
      { name: "opt/app/new", content: "template\n" },
      { name: "srv/", type: "dir" },
      { name: "srv/data", type: "char", dev: [0, 0] },
      { name: "tmp-made/", type: "dir" },
      { name: "tmp-made/file", content: "first layer\n" },
    ]);
    // A second layer: deletes what the first made, and makes again the directory the first deleted (without the opaque xattr).
    await stacked([
      { name: "tmp-made", type: "char", dev: [0, 0] },
      { name: "srv/", type: "dir" },
      { name: "srv/data/", type: "dir" },
      { name: "srv/data/fresh", content: "second layer\n" },
    ]);

    expect(existsSync(join(root, "etc/keep"))).toBe(false); // nothing of the base is copied
    expect(read("etc/changed")).toBe("template\n");
    expect(whiteout("etc/deleted")).toBe(true);
    expect(whiteout("opt/app/old1")).toBe(true);
    expect(read("opt/app/old2")).toBe("template\n");
    expect(whiteout("tmp-made")).toBe(true);
    expect(readdirSync(join(root, "srv/data")).sort()).toEqual(["fresh", "inner"]);
    expect(whiteout("srv/data/inner")).toBe(true);
    expect(readFileSync(join(base, "etc/deleted"), "utf8")).toBe("base\n");

    const seen = overlayView([root, base], "cat etc/keep etc/changed; ls -A etc; ls -A opt/app; ls -A srv/data; test -e tmp-made || echo no-tmp-made");
    if (seen === undefined) return; // (no user namespaces here: the files above are what overlayfs reads)
    expect(seen.split("\n")).toEqual(["base", "template", "changed", "keep", "new", "old2", "fresh", "no-tmp-made", ""]);
  });
});
