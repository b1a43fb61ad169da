import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentClient } from "../../helpers/multipart.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

/** Bad input is a 4xx, never a 500. */
let agent: TestAgent;
let api: ReturnType<typeof agentClient>;
beforeAll(async () => {
  agent = await startTestAgent();
  api = agentClient(agent.url);
});
afterAll(() => agent.stop());

const enc = (p: string) => `/filesystem/${encodeURIComponent(p)}`;

describe("paths", () => {
  it("answers 400 to overlong UTF-8 in a path", async () => {
    for (const url of ["/filesystem/%c0%ae%c0%ae/x", "/filesystem-multipart/initiate/%c0%ae", "/process/%c0%ae"]) {
      const res = await api.get(url);
      expect(res.status, url).toBe(400);
      expect(res.body.error).toBeTypeOf("string");
    }
  });

  it("answers 400 to a name longer than 255 bytes", async () => {
    const long = "n".repeat(300);
    expect((await api.put(enc(`/${long}`)).send({ content: "x" })).status).toBe(400);
    expect((await api.get(enc(`/${long}`))).status).toBe(400);
    expect((await api.get(enc(`/${long}/below`))).status).toBe(400);
  });

  it("writes and reads names of 238 to 255 bytes (the temp name is short)", async () => {
    for (const n of [238, 250, 255]) {
      const name = `/${"é".repeat(Math.floor(n / 2))}${n % 2 ? "x" : ""}`;
      expect(Buffer.byteLength(name) - 1).toBe(n);
      const put = await api.put(enc(name)).send({ content: `len ${n}` });
      expect(put.status, String(n)).toBe(200);
      expect((await api.get(enc(name))).body.content).toBe(`len ${n}`);
    }
  });
});

describe("downloads", () => {
  beforeAll(async () => {
    await api.put(enc("/dl/ten.txt")).send({ content: "0123456789" });
  });
  const download = (range: string) => api.get(enc("/dl/ten.txt")).set("Accept", "application/octet-stream").set("Range", range);

  it("ignores an invalid range (last before first) and sends the whole file", async () => {
    const res = await download("bytes=900-100");
    expect(res.status).toBe(200);
    expect(res.text).toBe("0123456789");
  });
  it("answers 416 with Content-Range to a range past the end", async () => {
    const res = await download("bytes=100-200");
    expect(res.status).toBe(416);
    expect(res.headers["content-range"]).toBe("bytes */10");
  });
  it("clamps a range running past the end", async () => {
    const res = await download("bytes=8-100");
    expect(res.status).toBe(206);
    expect(res.headers["content-range"]).toBe("bytes 8-9/10");
    expect(res.text).toBe("89");
  });
  it("serves a suffix range", async () => {
    const res = await download("bytes=-3");
    expect(res.status).toBe(206);
    expect(res.text).toBe("789");
  });
  it("downloads a file whose name holds backslashes and dots", async () => {
    writeFileSync(join(agent.root, "a\\..\\b"), "odd");
    const res = await api
      .get(enc("/a\\..\\b"))
      .set("Accept", "application/octet-stream")
      .buffer(true)
      .parse((r, done) => {
        const chunks: Buffer[] = [];
        r.on("data", (c: Buffer) => chunks.push(c));
        r.on("end", () => done(null, Buffer.concat(chunks)));
      });
    expect(res.status).toBe(200);
    expect(String(res.body)).toBe("odd");
  });
});

describe("a full database", () => {
  it("answers 507 on schedule create, process start and multipart initiate", async () => {
    // Fill the database up to a page limit; each request then carries a field too big for the free room on its table's page.
    const db = agent.runtime.deps.db;
    db.exec("CREATE TABLE filler (data BLOB)");
    db.pragma(`max_page_count = ${(db.pragma("page_count", { simple: true }) as number) + 50}`);
    const fill = db.prepare("INSERT INTO filler VALUES (?)");
    for (const size of [8192, 512, 64]) {
      try {
        for (;;) fill.run(Buffer.alloc(size));
      } catch (e) {
        expect((e as { code?: string }).code).toBe("SQLITE_FULL");
      }
    }
    const big = "b".repeat(20_000);
    try {
      const schedule = await api.post("/schedules").send({ type: "cron", value: "* * * * *", input: { command: `echo ${big}` } });
      expect(schedule.status, JSON.stringify(schedule.body)).toBe(507);
      const proc = await api.post("/process").send({ command: `echo ${big}` });
      expect(proc.status, JSON.stringify(proc.body).slice(0, 200)).toBe(507);
      const deep = Array.from({ length: 40 }, () => "d".repeat(250)).join("/");
      const upload = await api.post(`/filesystem-multipart/initiate/${encodeURIComponent(`/${deep}`)}`).send({});
      expect(upload.status, JSON.stringify(upload.body)).toBe(507);
    } finally {
      db.pragma("max_page_count = 1073741823");
    }
  });
});
