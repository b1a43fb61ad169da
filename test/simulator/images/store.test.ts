import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseImageRef, formatImageRef, storeKey } from "../../../simulator/images/image-ref.js";
import { ImageNotFoundError, ImageStore } from "../../../simulator/images/image-store.js";
import { alive, withLock } from "../../../simulator/images/lock.js";
import { silentProgress } from "../../../simulator/images/progress.js";
import { eventually } from "../launcher/helpers.js";
import { isHubTag, recipeFor } from "../../../simulator/images/recipes.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";
import { gzipped, tarOf, writeOciLayout, type TestEntry } from "./tar-writer.js";

const BASE: TestEntry[] = [
  { name: "bin/", type: "dir" },
  { name: "bin/hello", content: "#!/bin/sh\necho hello\n", mode: 0o755 },
  { name: "etc/old.conf", content: "old" },
  { name: "etc/motd", content: "base" },
];
const TOP: TestEntry[] = [{ name: "etc/.wh.old.conf" }, { name: "etc/motd", content: "top" }];

describe("image references", () => {
  it("parses and normalizes names as the SDK passes them", () => {
    expect(formatImageRef(parseImageRef("blaxel/base-image"))).toBe("blaxel/base-image:latest");
    expect(parseImageRef("ghcr.io/blaxel/nextjs:v1")).toMatchObject({ registry: "ghcr.io", repository: "blaxel/nextjs", tag: "v1" });
    expect(parseImageRef("localhost:5000/app")).toMatchObject({ registry: "localhost:5000", repository: "app", tag: "latest" });
    expect(() => parseImageRef("Bad Name")).toThrow(/invalid repository/);
    expect(storeKey("blaxel/base-image:latest")).not.toContain("/");
    expect(recipeFor(parseImageRef("blaxel/jupyter-server"), false)?.name).toBe("jupyter-server");
    expect(recipeFor(parseImageRef("blaxel/base-image:0.3.1"), false)?.name).toBe("base-image");
    expect(recipeFor(parseImageRef("node"), false)).toBeUndefined(); // a bare name goes to Docker first
    expect(recipeFor(parseImageRef("node"), true)?.name).toBe("node");
    expect(recipeFor(parseImageRef("someone/node"), true)).toBeUndefined();
  });

  it("knows the tags the hub publishes: latest and release versions, nothing else", async () => {
    for (const tag of ["latest", "0.3.1", "1.0.0", "0.2.0-rc.1"]) expect(isHubTag(tag), tag).toBe(true);
    for (const tag of ["notexistingtag", "develop", "v0.3.1", "0.3", "main-abc1234", "22"]) expect(isHubTag(tag), tag).toBe(false);
    const store = new ImageStore({ dir: trackedTempDir("hub-tags-"), docker: null });
    expect(await store.locate("blaxel/base-image:0.3.1")).toMatchObject({ kind: "recipe", recipe: { name: "base-image" } });
    expect(await store.locate("ghcr.io/blaxel/nextjs")).toMatchObject({ kind: "recipe", recipe: { name: "nextjs" } });
    const missing = await store.locate("blaxel/base-image:notexistingtag").catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ImageNotFoundError);
    expect((missing as Error).message).toMatch(/publishes blaxel\/base-image as "latest" and as release versions/);
    await expect(store.locate("node:22")).rejects.toThrow(/not as "22"/);
  });
});

describe("lock", () => {
  it("runs one holder at a time in a process", async () => {
    const dir = trackedTempDir("lock-");
    const order: string[] = [];
    const slow = (name: string) =>
      withLock(dir, "k", async () => {
        order.push(`${name} in`);
        await new Promise((r) => setImmediate(r));
        order.push(`${name} out`);
      });
    await Promise.all([slow("a"), slow("b")]);
    expect(order).toEqual(["a in", "a out", "b in", "b out"]);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("waits for a lock another live process holds, and takes over one whose holder died", async () => {
    const dir = trackedTempDir("lock-");
    const holder = spawn("sleep", ["30"]);
    writeFileSync(join(dir, "k.lock"), JSON.stringify({ pid: holder.pid, host: (await import("node:os")).hostname(), since: "" }));
    let waited: number | undefined;
    let ran = false;
    const run = withLock(dir, "k", async () => void (ran = true), { pollMs: 20, onWait: (h) => (waited = h?.pid) });
    await new Promise((r) => setTimeout(r, 100));
    expect(ran).toBe(false);
    expect(waited).toBe(holder.pid);
    holder.kill("SIGKILL");
    await new Promise((r) => holder.once("exit", r));
    await run;
    expect(ran).toBe(true);
  });
});

describe("build tools", () => {
  it("a simulator that exits ends the build tools it runs instead of leaving them behind", async () => {
    const tools = join(process.cwd(), "dist/simulator/images/tools.js");
    const script = `const { runTool } = await import(${JSON.stringify(tools)}); runTool("sh", ["-c", "echo $$; exec sleep 60"], { onLine: (l) => { console.log(l); process.exit(0); } });`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d));
    await new Promise((r) => child.once("exit", r));
    const pid = Number(out.trim());
    expect(pid).toBeGreaterThan(0);
    await eventually(() => !alive(pid));
  });
});

describe("ImageStore", () => {
  it("imports an OCI layout: layers applied in order with whiteouts, manifest written, names resolved", async () => {
    const work = trackedTempDir("store-");
    const layout = join(work, "layout");
    writeOciLayout(layout, [BASE, TOP]);
    const store = new ImageStore({ dir: join(work, "store"), docker: null });
    const image = await store.import(layout, "tiny");
    expect(image.ref).toBe("tiny:latest");
    expect(readFileSync(join(image.rootfs, "bin/hello"), "utf8")).toContain("echo hello");
    expect(readFileSync(join(image.rootfs, "etc/motd"), "utf8")).toBe("top");
    expect(existsSync(join(image.rootfs, "etc/old.conf"))).toBe(false);
    expect(image.manifest).toMatchObject({ source: "import", refs: ["tiny:latest"], config: { env: ["PATH=/bin", "GREETING=hi"], workingDir: "/work" } });
    expect(image.manifest.digest).toMatch(/^sha256:[a-f0-9]{64}$/);
    expect(image.manifest.size).toBeGreaterThan(0);
    expect(Date.parse(image.manifest.created)).not.toBeNaN();
    expect(JSON.parse(readFileSync(join(image.rootfs, "..", "manifest.json"), "utf8")).digest).toBe(image.manifest.digest);
    // Found by every spelling of its name; a second name of the same image shares its root filesystem.
    expect((await store.locate("tiny:latest")).kind).toBe("stored");
    const again = await store.import(layout, "docker.io/me/tiny:v1");
    expect(again.rootfs).toBe(image.rootfs);
    expect(store.list().map((i) => i.ref)).toEqual(["docker.io/me/tiny:v1", "tiny:latest"]);
    expect(readdirSync(join(work, "store", "tmp"))).toEqual([]);
    // Removing one name keeps the image for the other; the last name takes it away.
    expect(store.remove("tiny")).toBe(true);
    expect(existsSync(image.rootfs)).toBe(true);
    expect(store.remove("docker.io/me/tiny:v1")).toBe(true);
    expect(existsSync(image.rootfs)).toBe(false);
    // An image no name points at any more (a name re-pointed elsewhere) goes with prune.
    const kept = await store.import(layout, "kept");
    mkdirSync(join(work, "store", "images", "0".repeat(64), "rootfs"), { recursive: true });
    expect(store.prune()).toEqual([`sha256:${"0".repeat(64)}`]);
    expect(existsSync(kept.rootfs)).toBe(true);
  });

  it("an image stacked on another (a template over its base): its layers are its own over the base's, the base stays while it is needed", async () => {
    const work = trackedTempDir("store-stacked-");
    const layout = join(work, "layout");
    writeOciLayout(layout, [BASE]);
    const store = new ImageStore({ dir: join(work, "store"), docker: null });
    const base = await store.import(layout, "base");
    const stacked = await store.installBuilt("stacked", "Dockerfile", silentProgress, async (rootfs) => {
      writeFileSync(join(rootfs, "own"), "template's");
      return {
        digest: `sha256:${"1".repeat(64)}`,
        config: { env: [], workingDir: "/", entrypoint: [], cmd: [], user: "" },
        size: 10,
        base: base.manifest.digest,
      };
    });
    expect(stacked.manifest.base).toBe(base.manifest.digest);
    expect(stacked.layers).toEqual([stacked.rootfs, base.rootfs]);
    expect(store.get("stacked")?.layers).toEqual(stacked.layers);
    // The base's name goes: its files stay for the image stacked on it, through prune too.
    expect(store.remove("base")).toBe(true);
    expect(existsSync(base.rootfs)).toBe(true);
    expect(store.prune()).toEqual([]);
    expect(store.get("stacked")?.layers).toEqual(stacked.layers);
    // The last image on it goes: the base goes with it.
    expect(store.remove("stacked")).toBe(true);
    expect(existsSync(stacked.rootfs)).toBe(false);
    expect(existsSync(base.rootfs)).toBe(false);
    expect(readdirSync(join(work, "store", "images"))).toEqual([]);
  });

  it("imports a tar.gz of an OCI layout, and refuses a blob whose content does not match its digest", async () => {
    const work = trackedTempDir("store-");
    const layout = join(work, "layout");
    writeOciLayout(layout, [BASE]);
    const files = (dir: string, prefix = ""): TestEntry[] =>
      readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((d) =>
        d.isDirectory()
          ? [{ name: `${prefix}${d.name}/`, type: "dir" as const }, ...files(dir, `${prefix}${d.name}/`)]
          : [{ name: `${prefix}${d.name}`, content: readFileSync(join(dir, prefix, d.name)) }],
      );
    writeFileSync(join(work, "image.tar.gz"), gzipped(tarOf(files(layout))));
    const store = new ImageStore({ dir: join(work, "store"), docker: null });
    expect(readFileSync(join((await store.import(join(work, "image.tar.gz"), "packed")).rootfs, "etc/motd"), "utf8")).toBe("base");
    const blobs = join(layout, "blobs", "sha256");
    const layer = readdirSync(blobs).find((f) => readFileSync(join(blobs, f))[0] === 0x1f)!;
    writeFileSync(join(blobs, layer), gzipped(tarOf([{ name: "evil", content: "swapped" }])));
    await expect(store.import(layout, "tampered")).rejects.toThrow(/does not match its content/);
    expect(store.get("tampered")).toBeUndefined();
    expect(readdirSync(join(work, "store", "tmp"))).toEqual([]);
  });

  it("refuses an archive whose layer climbs out of the root, leaving nothing behind", async () => {
    const work = trackedTempDir("store-");
    writeOciLayout(join(work, "layout"), [[{ name: "../../escaped", content: "x" }]]);
    const store = new ImageStore({ dir: join(work, "store"), docker: null });
    await expect(store.import(join(work, "layout"), "evil")).rejects.toThrow(/\.\./);
    expect(store.list()).toEqual([]);
    expect(existsSync(join(work, "escaped"))).toBe(false);
  });

  it("locates hub images without building them, and names no source has as not found with the supported list", async () => {
    const store = new ImageStore({ dir: trackedTempDir("store-"), docker: null });
    expect(await store.locate("blaxel/base-image:latest")).toMatchObject({ kind: "recipe", ref: "blaxel/base-image:latest" });
    expect(await store.locate("nextjs")).toMatchObject({ kind: "recipe", ref: "blaxel/nextjs:latest" });
    const missing = await store.locate("nobody/nothing:1").catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ImageNotFoundError);
    expect((missing as ImageNotFoundError).supported).toContain("blaxel/jupyter-server:latest");
  });

  it("removes the work dirs of builds whose process died, and keeps those of a live one", async () => {
    const dir = trackedTempDir("store-");
    const dead = spawn("true");
    await new Promise((r) => dead.once("exit", r));
    const live = spawn("sleep", ["30"]);
    mkdirSync(join(dir, "tmp", `build-${dead.pid}-abc`, "rootfs"), { recursive: true });
    mkdirSync(join(dir, "tmp", `build-${live.pid}-def`), { recursive: true });
    new ImageStore({ dir, docker: null });
    expect(readdirSync(join(dir, "tmp"))).toEqual([`build-${live.pid}-def`]);
    live.kill("SIGKILL");
  });

  it("concurrent imports of the same name build once and agree", async () => {
    const work = trackedTempDir("store-");
    writeOciLayout(join(work, "layout"), [BASE]);
    const store = new ImageStore({ dir: join(work, "store"), docker: null });
    const [a, b] = await Promise.all([store.import(join(work, "layout"), "same"), store.import(join(work, "layout"), "same")]);
    expect(a.rootfs).toBe(b.rootfs);
    expect(readdirSync(join(work, "store", "images"))).toHaveLength(1);
  });
});
