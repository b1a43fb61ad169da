import { appendFileSync, openSync, readFileSync, rmSync, statSync, writeSync, closeSync, existsSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { capLog, LogFiles, readLast, truncationMarker } from "../../../sandbox-agent/process/output.js";
import { LiveOutput } from "../../../sandbox-agent/process/live-output.js";
import { tempDir } from "../../helpers/agent.js";

let dir: string;
let files: LogFiles;
beforeEach(() => {
  dir = tempDir("process-output-");
  files = new LogFiles(dir, "p1");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const digits = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => String((from + i) % 10)).join("");

describe("capLog", () => {
  it("leaves a file at or under the trigger alone", async () => {
    appendFileSync(files.live("stdout"), "short");
    expect(await capLog(files.live("stdout"), files.old("stdout"), 10, 5)).toBeNull();
    expect(readFileSync(files.live("stdout"), "utf8")).toBe("short");
    expect(existsSync(files.old("stdout"))).toBe(false);
  });

  it("moves the last `keep` bytes to the old file, truncates the live one and counts what it dropped", async () => {
    appendFileSync(files.live("stdout"), digits(0, 25));
    const result = await capLog(files.live("stdout"), files.old("stdout"), 10, 5);
    expect(result).toEqual({ dropped: 15, cutAt: 25 });
    expect(readFileSync(files.old("stdout"), "utf8")).toBe(digits(15, 25));
    expect(statSync(files.live("stdout")).size).toBe(0);
  });

  it("keeps the end of the previous old file when the live one holds less than `keep`", async () => {
    appendFileSync(files.live("stdout"), digits(0, 12));
    await capLog(files.live("stdout"), files.old("stdout"), 10, 5);
    appendFileSync(files.live("stdout"), digits(12, 18));
    // old "2..11" + live "12..17": the last 10 are 8..17, so 2..7 go
    expect(await capLog(files.live("stdout"), files.old("stdout"), 10, 5)).toEqual({ dropped: 6, cutAt: 6 });
    expect(readFileSync(files.old("stdout"), "utf8")).toBe(digits(8, 18));
  });

  it("a writer holding an O_APPEND descriptor keeps writing at the new end after a cap", async () => {
    const fd = openSync(files.live("stdout"), "a"); // what the child gets
    writeSync(fd, digits(0, 30));
    await capLog(files.live("stdout"), files.old("stdout"), 10, 5);
    writeSync(fd, "tail");
    closeSync(fd);
    expect(readFileSync(files.live("stdout"), "utf8")).toBe("tail"); // no hole of zeros before it
    const read = await files.readTail("stdout", 100, 20);
    expect(read.data.toString()).toBe(digits(20, 30) + "tail");
    expect(read.dropped).toBe(20);
  });

  it("a missing live file is nothing to cap", async () => {
    expect(await capLog(files.live("stderr"), files.old("stderr"), 10, 5)).toBeNull();
  });
});

describe("LogFiles.readTail", () => {
  it("returns old + live cut to the limit, tail kept, counting the cut bytes", async () => {
    appendFileSync(files.old("stderr"), "abcdef");
    appendFileSync(files.live("stderr"), "ghij");
    expect(await files.readTail("stderr", 100)).toEqual({ data: Buffer.from("abcdefghij"), dropped: 0 });
    const cut = await files.readTail("stderr", 6, 3);
    expect(cut.data.toString()).toBe("efghij");
    expect(cut.dropped).toBe(3 + 4);
    expect((await files.readTail("stderr", 3)).data.toString()).toBe("hij");
  });

  it("a missing file reads as empty", async () => {
    expect(await files.readTail("stdout", 10)).toEqual({ data: Buffer.alloc(0), dropped: 0 });
  });

  it("never starts in the middle of a UTF-8 character", async () => {
    appendFileSync(files.live("stdout"), "aé€"); // 1 + 2 + 3 bytes
    const read = await files.readTail("stdout", 4);
    expect(read.data.toString("utf8")).toBe("€");
    expect(read.dropped).toBe(3);
  });

  it("reads the live file only up to a limit when asked", async () => {
    appendFileSync(files.live("stdout"), "0123456789");
    expect((await files.readTail("stdout", 100, 0, 4)).data.toString()).toBe("0123");
    expect((await readLast(files.live("stdout"), 3, 4)).data.toString()).toBe("123");
  });

  it("marks a dropped head once, with the count", () => {
    expect(truncationMarker(0)).toBe("");
    expect(truncationMarker(42)).toBe("[output truncated: 42 earlier bytes dropped]\n");
  });
});

describe("LiveOutput", () => {
  it("delivers backlog then live chunks with no gap or overlap, across a capping, and ends on finish", async () => {
    const fd = openSync(files.live("stdout"), "a");
    writeSync(fd, "early\n");
    const drops: number[] = [];
    const live = new LiveOutput(files, { capBytes: 40, onDropped: (d) => drops.push(d.stdout) });
    const chunks: string[] = [];
    let ended = false;
    const { backlog } = await live.subscribe(
      {
        chunk: (_s, d) => chunks.push(d.toString()),
        end: () => {
          ended = true;
        },
      },
      1000,
    );
    expect(backlog.stdout.data.toString()).toBe("early\n");
    writeSync(fd, `${digits(0, 50)}\n`); // beyond the cap: the pump caps after delivering it
    writeSync(fd, "last\n");
    closeSync(fd);
    await live.finish();
    expect(ended).toBe(true);
    expect(chunks.join("")).toBe(`${digits(0, 50)}\nlast\n`);
    expect(drops.at(-1)).toBeGreaterThan(0);
    // what a reader sees afterwards: the tail within the cap, and how much was dropped
    const after = await files.readTail("stdout", 40, live.dropped.stdout);
    expect(after.data.toString()).toBe(`${digits(0, 50)}\nlast\n`.slice(-40));
    expect(after.dropped).toBe(6 + 51 + 5 - 40);
    // and on disk no more than the cap is kept
    expect(statSync(files.old("stdout")).size + statSync(files.live("stdout")).size).toBeLessThanOrEqual(40);
  });

  it("a listener added after the end is told at once", async () => {
    const live = new LiveOutput(files, { capBytes: 100, onDropped: () => undefined });
    await live.finish();
    let ended = false;
    await live.subscribe(
      {
        chunk: () => undefined,
        end: () => {
          ended = true;
        },
      },
      100,
    );
    expect(ended).toBe(true);
  });
});
