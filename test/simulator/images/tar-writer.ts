import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

/** A minimal ustar writer for tests: any entry name (even a hostile one), files, dirs, links. */
export interface TestEntry {
  name: string;
  type?: "file" | "dir" | "symlink" | "hardlink" | "fifo" | "char";
  content?: string | Buffer;
  link?: string;
  mode?: number;
  /** A device's numbers (default 0/0: an overlay whiteout). */
  dev?: [number, number];
  /** Extended attributes, as GNU tar --xattrs writes them (pax SCHILY.xattr.<name>). */
  xattrs?: Record<string, string>;
}

const FLAG = { file: "0", hardlink: "1", symlink: "2", dir: "5", fifo: "6", char: "3" } as const;

/** A pax extended header entry carrying the records. */
function paxHeader(records: Record<string, string>): Buffer {
  const body = Buffer.concat(
    Object.entries(records).map(([key, value]) => {
      const text = ` ${key}=${value}\n`;
      let length = Buffer.byteLength(text) + 1;
      while (String(length).length + Buffer.byteLength(text) !== length) length = String(length).length + Buffer.byteLength(text);
      return Buffer.from(`${length}${text}`);
    }),
  );
  const header = tarOf([{ name: "././@PaxHeader", content: body }]).subarray(0, 512 + Math.ceil(body.length / 512) * 512);
  header[156] = "x".charCodeAt(0);
  fixChecksum(header);
  return header;
}

function field(buf: Buffer, value: string, at: number, length: number): void {
  buf.write(value.slice(0, length), at, length, "utf8");
}

function octal(buf: Buffer, value: number, at: number, length: number): void {
  field(buf, value.toString(8).padStart(length - 1, "0") + "\0", at, length);
}

export function tarOf(entries: TestEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? "file";
    const data = type === "file" ? Buffer.from(e.content ?? "") : Buffer.alloc(0);
    const header = Buffer.alloc(512);
    const name = type === "dir" && !e.name.endsWith("/") ? `${e.name}/` : e.name;
    if (Buffer.byteLength(name) > 100) {
      // GNU long name: a separate entry carrying the name.
      const long = Buffer.from(name + "\0");
      blocks.push(tarOf([{ name: "././@LongLink", content: long }]).subarray(0, 512 + Math.ceil(long.length / 512) * 512));
      blocks[blocks.length - 1]![156] = "L".charCodeAt(0);
      fixChecksum(blocks[blocks.length - 1]!);
    }
    if (e.xattrs) blocks.push(paxHeader(Object.fromEntries(Object.entries(e.xattrs).map(([k, v]) => [`SCHILY.xattr.${k}`, v]))));
    field(header, name, 0, 100);
    octal(header, e.mode ?? (type === "dir" ? 0o755 : 0o644), 100, 8);
    octal(header, 0, 108, 8);
    octal(header, 0, 116, 8);
    octal(header, data.length, 124, 12);
    octal(header, 1_700_000_000, 136, 12);
    header[156] = FLAG[type].charCodeAt(0);
    field(header, e.link ?? "", 157, 100);
    field(header, "ustar\0", 257, 6);
    field(header, "00", 263, 2);
    if (type === "char") {
      octal(header, e.dev?.[0] ?? 0, 329, 8);
      octal(header, e.dev?.[1] ?? 0, 337, 8);
    }
    fixChecksum(header);
    blocks.push(header, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

function fixChecksum(header: Buffer): void {
  header.fill(0x20, 148, 156);
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += header[i]!;
  header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii");
}

export const gzipped = (buf: Buffer) => gzipSync(buf);

/** An async stream of a buffer in small chunks (exercises the reader's block boundaries). */
export async function* chunks(buf: Buffer, size = 333): AsyncIterable<Buffer> {
  for (let at = 0; at < buf.length; at += size) yield buf.subarray(at, at + size);
}

const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** Writes an OCI image layout of the given layers (gzip) into dir. */
export function writeOciLayout(
  dir: string,
  layers: TestEntry[][],
  config: object = { config: { Env: ["PATH=/bin", "GREETING=hi"], WorkingDir: "/work" } },
  refName = "latest",
): void {
  mkdirSync(join(dir, "blobs", "sha256"), { recursive: true });
  const blob = (data: Buffer) => {
    writeFileSync(join(dir, "blobs", "sha256", sha(data)), data);
    return { digest: `sha256:${sha(data)}`, size: data.length };
  };
  const layerDescs = layers.map((entries) => ({ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", ...blob(gzipped(tarOf(entries))) }));
  const configDesc = {
    mediaType: "application/vnd.oci.image.config.v1+json",
    ...blob(Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", ...config }))),
  };
  const manifest = blob(
    Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json", config: configDesc, layers: layerDescs })),
  );
  writeFileSync(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  writeFileSync(
    join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [{ mediaType: "application/vnd.oci.image.manifest.v1+json", ...manifest, annotations: { "org.opencontainers.image.ref.name": refName } }],
    }),
  );
}
