import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { deflateRawSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apkScript, APK_TO_DEBIAN } from "../../../simulator/images/apk-stand-in.js";
import { renameImages } from "../../../simulator/images/dockerfile-refs.js";
import { parseImageRef } from "../../../simulator/images/image-ref.js";
import { NoStandIn, standInFor } from "../../../simulator/images/stand-ins.js";
import { unzipInto, ZipError } from "../../../simulator/images/zip-reader.js";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * The parts of the upload flow that need no builder: the zip reader (confinement), the stand-ins' mapping of
 * official names, the digest rename in a Dockerfile, the apk script (with a recording apt-get), and the
 * routes' answers to an upload URL that is unknown or used, or a simulator without an image store.
 */

interface Entry {
  name: string;
  data?: string;
  /** Unix mode with its type bits (0o120777: a symbolic link). */
  mode?: number;
  deflate?: boolean;
}

/** A zip as archiver writes one (Unix "made by", sizes in the central directory). */
function zipOf(entries: Entry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const raw = Buffer.from(e.data ?? "");
    const body = e.deflate ? deflateRawSync(raw) : raw;
    const name = Buffer.from(e.name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x800, 6);
    local.writeUInt16LE(e.deflate ? 8 : 0, 8);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(raw.length, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x800, 8);
    central.writeUInt16LE(e.deflate ? 8 : 0, 10);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(raw.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(((e.mode ?? 0o100644) << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    centrals.push(central, name);
    offset += 30 + name.length + body.length;
  }
  const dir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(dir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, dir, end]);
}

async function unzip(entries: Entry[]): Promise<{ dir: string; result: number | Error }> {
  const work = trackedTempDir("zip-test-");
  writeFileSync(join(work, "c.zip"), zipOf(entries));
  const dir = join(work, "out");
  mkdirSync(dir);
  const result = await unzipInto(join(work, "c.zip"), dir).catch((err: Error) => err);
  return { dir, result };
}

describe("the build context's zip", () => {
  it("unpacks stored and deflated files, directories and modes", async () => {
    const { dir, result } = await unzip([
      { name: "Dockerfile", data: "FROM node:20-slim\n", deflate: true },
      { name: "app/", mode: 0o040755 },
      { name: "app/run.sh", data: "#!/bin/sh\necho hi\n", mode: 0o100755 },
    ]);
    expect(result).toBe(2);
    expect(readFileSync(join(dir, "Dockerfile"), "utf8")).toBe("FROM node:20-slim\n");
    expect(statSync(join(dir, "app/run.sh")).mode & 0o777).toBe(0o755);
  });

  it.each([
    ["a .. component", "../outside", /outside the context/],
    ["an absolute name", "/etc/evil", /outside the context/],
    ["a nested .. component", "app/../../x", /outside the context/],
  ])("refuses %s, writing nothing outside", async (_what, name, message) => {
    const { dir, result } = await unzip([{ name, data: "x" }]);
    expect(result).toBeInstanceOf(ZipError);
    expect((result as Error).message).toMatch(message);
    expect(existsSync(join(dir, "..", "outside"))).toBe(false);
  });

  it("refuses a symbolic link and what is not a zip", async () => {
    const link = await unzip([{ name: "link", data: "/etc/passwd", mode: 0o120777 }]);
    expect((link.result as Error).message).toContain("is a symbolic link");
    expect(readdirSync(link.dir)).toEqual([]);
    const work = trackedTempDir("zip-test-");
    writeFileSync(join(work, "not.zip"), "plain text");
    await expect(unzipInto(join(work, "not.zip"), work)).rejects.toThrow(/not a zip archive/);
  });
});

describe("the offline stand-ins of official images", () => {
  const of = (name: string) => standInFor(parseImageRef(name));
  it("cover node, python and debian tags, with what differs said", () => {
    expect(of("node:20-slim")).toMatchObject({
      name: "sandbox-kit-stand-ins/node:20-slim",
      recipe: { packages: ["nodejs"], basePackages: ["ca-certificates"] },
    });
    expect(of("node:22-alpine")?.recipe.steps.map((s) => s.kind)).toEqual(["node-release", "npm-global", "file"]);
    expect(of("node:22-alpine")?.note).toContain("apk");
    expect(of("docker.io/library/node:24")?.recipe.steps[0]).toMatchObject({ kind: "node-release", major: "24" });
    expect(of("python:3.11-slim")?.note).toContain("Python 3.13 stands in for 3.11");
    expect(of("debian:bookworm-slim")?.recipe.suite).toBe("bookworm");
    expect(of("node:20-bookworm")?.note).toContain("rather than bookworm");
  });

  it("leave other images alone and say why an official tag has none", () => {
    expect(of("ghcr.io/acme/node:20")).toBeUndefined();
    expect(of("my/node:20")).toBeUndefined();
    expect(() => of("node:lts")).toThrow(NoStandIn);
    expect(() => of("python:2.7")).toThrow(/Python 3 only/);
    expect(() => of("debian:sid")).toThrow(/no offline stand-in for debian:sid/);
  });

  it("a pinned digest's image is renamed in FROM and COPY --from, variables substituted, the rest untouched", () => {
    const pinned = `node:22-alpine@sha256:${"c".repeat(64)}`;
    const text = ["ARG V=22", `FROM node:\${V}-alpine@sha256:${"c".repeat(64)} AS base`, "RUN echo FROM node", `COPY --from=${pinned} /a /a`, "FROM base"].join(
      "\n",
    );
    expect(renameImages(text, [], new Map([[pinned, "node:22-alpine"]])).split("\n")).toEqual([
      "ARG V=22",
      "FROM node:22-alpine AS base",
      "RUN echo FROM node",
      "COPY --from=node:22-alpine /a /a",
      "FROM base",
    ]);
  });
});

describe("the Alpine stand-ins' apk", () => {
  const dir = trackedTempDir("apk-test-");
  const log = join(dir, "apt.log");
  beforeAll(() => {
    writeFileSync(join(dir, "apk"), apkScript(), { mode: 0o755 });
    // A recording apt-get: what apk asks of it, nothing installed.
    writeFileSync(join(dir, "apt-get"), `#!/bin/sh\necho "$*" >> ${JSON.stringify(log)}\n`);
    chmodSync(join(dir, "apt-get"), 0o755);
  });
  const apk = (...args: string[]) => {
    writeFileSync(log, "");
    try {
      const out = execFileSync(join(dir, "apk"), args, { encoding: "utf8", env: { PATH: `${dir}:/usr/bin:/bin` } });
      return { code: 0, out, apt: readFileSync(log, "utf8") };
    } catch (err) {
      const e = err as { status: number; stdout: string };
      return { code: e.status, out: e.stdout, apt: readFileSync(log, "utf8") };
    }
  };

  it("installs the Debian equivalents of the packages it knows (options and version constraints taken)", () => {
    const r = apk("add", "--no-cache", "--virtual", ".deps", "git", "build-base", "py3-pip=23.1-r0", "libc6-compat", "openssh");
    expect(r.code).toBe(0);
    expect(r.apt).toContain("install -y -qq --no-install-recommends git build-essential python3-pip openssh-client openssh-server");
    expect(apk("update")).toMatchObject({ code: 0, apt: "update -qq\n" });
  });

  it("refuses an unknown package by name before installing anything, and subcommands it does not emulate", () => {
    const r = apk("add", "git", "no-such-alpine-pkg");
    expect(r.code).toBe(1);
    expect(r.out).toContain("no Debian equivalent known for: no-such-alpine-pkg");
    expect(r.apt).not.toContain("install");
    expect(apk("fix").out).toContain("apk fix is not emulated");
    expect(Object.keys(APK_TO_DEBIAN)).toEqual(expect.arrayContaining(["git", "curl", "netcat-openbsd", "bash", "python3", "py3-pip", "make", "g++", "jq"]));
  });
});

describe("the upload routes' refusals", () => {
  let sim: ServedSimulator;
  let host: ServedSimulator;
  const headers = { "x-blaxel-authorization": "Bearer upload-key", "x-blaxel-workspace": "uploads", "content-type": "application/json" };
  beforeAll(async () => {
    sim = await serveSimulator({ port: 0, apiKey: "upload-key", workspace: "uploads", logLevel: "silent", imageCache: trackedTempDir("upload-store-") });
    host = await serveSimulator({ port: 0, apiKey: "upload-key", workspace: "uploads", logLevel: "silent", imageSource: "host" });
  });
  afterAll(async () => {
    await sim?.stop();
    await host?.stop();
  }, 60_000);

  it("an upload URL is used once; an unknown one is 404; a missing sandbox's PUT is 404 (the SDK then creates it)", async () => {
    const missing = await fetch(`${sim.url}/v0/sandboxes/nope?upload=true`, { method: "PUT", headers, body: JSON.stringify({ metadata: { name: "nope" } }) });
    expect(missing.status).toBe(404);
    const created = await fetch(`${sim.url}/v0/sandboxes?upload=true`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "up-once" } }) });
    expect(created.status).toBe(200);
    expect(((await created.json()) as { status: string }).status).toBe("UPLOADING");
    const url = created.headers.get("x-blaxel-upload-url")!;
    expect(url).toMatch(new RegExp(`^${sim.url}/uploads/[A-Za-z0-9_-]{32}$`));
    const bad = new Uint8Array(zipOf([{ name: "../Dockerfile", data: "FROM scratch\n" }]));
    expect((await fetch(url, { method: "PUT", headers: { "content-type": "application/zip" }, body: bad })).status).toBe(200);
    expect((await fetch(url, { method: "PUT", headers: { "content-type": "application/zip" }, body: bad })).status).toBe(404);
    expect((await fetch(`${sim.url}/uploads/not-a-token`, { method: "PUT", body: bad })).status).toBe(404);
    // The bad context fails the build with the reason.
    let doc: { status?: string; events?: { message: string }[] } = {};
    for (let i = 0; i < 100 && doc.status !== "FAILED"; i++) {
      doc = (await (await fetch(`${sim.url}/v0/sandboxes/up-once`, { headers })).json()) as typeof doc;
      if (doc.status !== "FAILED") await new Promise((r) => setTimeout(r, 100));
    }
    expect(doc.status).toBe("FAILED");
    expect(doc.events?.at(-1)?.message).toContain("would be written outside the context");
  });

  it("without an image store the flow answers 501 saying why", async () => {
    const r = await fetch(`${host.url}/v0/sandboxes?upload=true`, { method: "POST", headers, body: JSON.stringify({ metadata: { name: "no-store" } }) });
    expect(r.status).toBe(501);
    expect(((await r.json()) as { message: string }).message).toContain("need the image store");
    const push = await fetch(`${host.url}/v0/images?upload=true`, {
      method: "POST",
      headers,
      body: JSON.stringify({ name: "no-store", resourceType: "sandbox" }),
    });
    expect(push.status).toBe(501);
    expect((await fetch(`${host.url}/v0/images/sandbox/no-store`, { headers })).status).toBe(404); // nothing recorded
  });

  it("bl push's request is validated before anything is recorded, and a bad context fails its image's build with the reason", async () => {
    const push = (body: object) => fetch(`${sim.url}/v0/images?upload=true`, { method: "POST", headers, body: JSON.stringify(body) });
    expect((await push({ name: "bad-type", resourceType: "model" })).status).toBe(400);
    expect((await push({ name: "Not_A_Name", resourceType: "sandbox" })).status).toBe(400);
    expect((await push({ resourceType: "sandbox" })).status).toBe(400);
    expect((await fetch(`${sim.url}/v0/images/sandbox/bad-type`, { headers })).status).toBe(404);
    const ok = await push({ name: "push-bad-zip", resourceType: "sandbox", generation: "mk3", labels: { memory: "2048" } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ name: "push-bad-zip", resourceType: "sandbox", image: "sandbox/push-bad-zip:latest", build: true });
    const url = ok.headers.get("x-blaxel-upload-url")!;
    const bad = new Uint8Array(zipOf([{ name: "../Dockerfile", data: "FROM scratch\n" }]));
    expect((await fetch(url, { method: "PUT", headers: { "content-type": "application/zip" }, body: bad })).status).toBe(200);
    let doc: { metadata?: { status?: string; events?: { type: string; message: string }[] } } = {};
    for (let i = 0; i < 100 && doc.metadata?.status !== "FAILED"; i++) {
      doc = (await (await fetch(`${sim.url}/v0/images/sandbox/push-bad-zip`, { headers })).json()) as typeof doc;
      if (doc.metadata?.status !== "FAILED") await new Promise((r) => setTimeout(r, 100));
    }
    expect(doc.metadata?.status).toBe("FAILED");
    expect(doc.metadata?.events?.at(-1)).toMatchObject({ type: "ai.blaxel.controlplane.buildimage.failed" });
    expect(doc.metadata?.events?.at(-1)?.message).toContain("would be written outside the context");

    // The CLI's build log watcher (GET /observability/logs) reads the build's lines, the failure among them.
    const start = new Date(Date.now() - 60_000).toISOString().slice(0, 19);
    const end = new Date(Date.now() + 3_600_000).toISOString().slice(0, 19);
    const logs = (path: string) => fetch(`${sim.url}/v0/observability/logs?${path}`, { headers });
    const read = await logs(`start=${start}&end=${end}&resourceType=sandboxes&workloadIds=push-bad-zip&type=all&traceId=&limit=1000&offset=0&search=`);
    expect(read.status).toBe(200);
    const body = (await read.json()) as Record<string, { logs: { message: string; severity: number; timestamp: string }[]; totalCount: number }>;
    expect(body["push-bad-zip"]!.totalCount).toBeGreaterThan(1);
    expect(body["push-bad-zip"]!.logs[0]).toMatchObject({ severity: 17 }); // newest first: the failure
    expect(body["push-bad-zip"]!.logs[0]!.message).toContain("build failed");
    const later = new Date(Date.now() + 600_000).toISOString().slice(0, 19);
    const none = (await (await logs(`start=${later}&resourceType=sandboxes&workloadIds=push-bad-zip`)).json()) as typeof body;
    expect(none["push-bad-zip"]).toEqual({ logs: [], totalCount: 0 });
    expect((await logs("resourceType=models&workloadIds=x")).status).toBe(400);
    expect((await logs("resourceType=sandboxes")).status).toBe(400);
    expect((await logs("resourceType=sandboxes&workloadIds=x&start=yesterday")).status).toBe(400);
  });
});
