import { describe, expect, it } from "vitest";
import { CursorCodec } from "../../../src/cursor.js";
import { everything, mergedPage, type AgentPage, type FetchPage } from "../../../simulator/schedules/merged-pages.js";

/** Agents in memory: items newest first, each agent paging with its own cursor (the offset of the next item). */
type Row = { id: string; createdAt: string; sandbox: string };
const at = (minute: number) => new Date(Date.UTC(2026, 4, 1, 10, minute)).toISOString();

function agents(data: Record<string, Row[]>): { fetch: FetchPage<Row>; calls: string[] } {
  const calls: string[] = [];
  const fetch: FetchPage<Row> = async (sandbox, cursor, limit) => {
    calls.push(`${sandbox}@${cursor}`);
    const rows = [...(data[sandbox] ?? [])].sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));
    const from = cursor ? Number(cursor) : 0;
    const page = rows.slice(from, from + limit);
    const hasMore = from + limit < rows.length;
    return { data: page, meta: { hasMore, nextCursor: hasMore ? String(from + limit) : "", total: rows.length } } satisfies AgentPage<Row>;
  };
  return { fetch, calls };
}

const rows = (sandbox: string, minutes: number[]): Row[] => minutes.map((m) => ({ id: `${sandbox}-${m}`, sandbox, createdAt: at(m) }));
const cursors = new CursorCodec({ secret: "test" });

async function walk(fetch: FetchPage<Row>, sandboxes: string[], limit: number, extra: { keep?: (r: Row) => boolean } = {}): Promise<Row[][]> {
  const pages: Row[][] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const page = await mergedPage({ sandboxes, fetch, limit, sort: "createdAt:desc", cursor, cursors, binding: { q: 1 }, ...extra });
    pages.push(page.data);
    if (!page.meta.hasMore) {
      expect(page.meta.nextCursor).toBe("");
      return pages;
    }
    cursor = page.meta.nextCursor;
  }
  throw new Error("did not end");
}

describe("mergedPage over several agents", () => {
  // 250 items per sandbox so every stream spans several agent pages of 100.
  const data = {
    a: rows(
      "a",
      Array.from({ length: 250 }, (_, i) => i * 3),
    ),
    b: rows(
      "b",
      Array.from({ length: 250 }, (_, i) => i * 3 + 1),
    ),
    c: rows(
      "c",
      Array.from({ length: 40 }, (_, i) => i * 7 + 2),
    ),
  };

  it("returns every item once, newest first, across pages of any size", async () => {
    const { fetch } = agents(data);
    for (const limit of [1, 7, 20, 100]) {
      const pages = await walk(fetch, ["a", "b", "c"], limit);
      const all = pages.flat();
      expect(all).toHaveLength(540);
      expect(new Set(all.map((r) => r.id)).size).toBe(540);
      expect(all.map((r) => r.createdAt)).toEqual([...all.map((r) => r.createdAt)].sort().reverse());
      expect(pages.slice(0, -1).every((p) => p.length === limit)).toBe(true);
    }
  });

  it("sums the agents' totals and applies a filter without short pages", async () => {
    const { fetch } = agents(data);
    const first = await mergedPage({ sandboxes: ["a", "b", "c"], fetch, limit: 10, sort: "createdAt:desc", cursors, binding: {} });
    expect(first.meta.total).toBe(540);
    const pages = await walk(fetch, ["a", "b", "c"], 10, { keep: (r) => r.sandbox !== "b" });
    expect(pages.flat()).toHaveLength(290);
    expect(pages.slice(0, -1).every((p) => p.length === 10)).toBe(true);
  });

  it("resumes after an item that was deleted between pages (trimmed executions)", async () => {
    const live = { a: rows("a", [1, 2, 3, 4, 5, 6]), b: rows("b", [10, 11]) };
    const { fetch } = agents(live);
    const first = await mergedPage({ sandboxes: ["a", "b"], fetch, limit: 4, sort: "createdAt:desc", cursors, binding: {} });
    expect(first.data.map((r) => r.id)).toEqual(["b-11", "b-10", "a-6", "a-5"]);
    live.a = live.a.filter((r) => r.id !== "a-6"); // already returned, then deleted: a plain offset would now skip a-4
    const second = await mergedPage({ sandboxes: ["a", "b"], fetch, limit: 4, sort: "createdAt:desc", cursor: first.meta.nextCursor, cursors, binding: {} });
    expect(second.data.map((r) => r.id)).toEqual(["a-4", "a-3", "a-2", "a-1"]);
  });

  it("a sandbox that appears between pages contributes only what sorts after the last item returned", async () => {
    const live: Record<string, Row[]> = { a: rows("a", [1, 3, 5, 7]) };
    const { fetch } = agents(live);
    const first = await mergedPage({ sandboxes: ["a"], fetch, limit: 2, sort: "createdAt:desc", cursors, binding: {} });
    expect(first.data.map((r) => r.id)).toEqual(["a-7", "a-5"]);
    live.n = rows("n", [6, 4, 2]);
    const second = await mergedPage({ sandboxes: ["a", "n"], fetch, limit: 10, sort: "createdAt:desc", cursor: first.meta.nextCursor, cursors, binding: {} });
    expect(second.data.map((r) => r.id)).toEqual(["n-4", "a-3", "n-2", "a-1"]);
  });

  it("rejects a cursor of another query, and a tampered one", async () => {
    const { fetch } = agents(data);
    const first = await mergedPage({ sandboxes: ["a"], fetch, limit: 2, sort: "createdAt:desc", cursors, binding: { type: "cron" } });
    await expect(
      mergedPage({ sandboxes: ["a"], fetch, limit: 2, sort: "createdAt:desc", cursor: first.meta.nextCursor, cursors, binding: { type: "at" } }),
    ).rejects.toThrow(/different query/);
    await expect(
      mergedPage({ sandboxes: ["a"], fetch, limit: 2, sort: "createdAt:desc", cursor: `x${first.meta.nextCursor}`, cursors, binding: { type: "cron" } }),
    ).rejects.toThrow(/invalid cursor/);
  });

  it("everything() walks one agent's pages to the end", async () => {
    const { fetch, calls } = agents(data);
    expect(await everything("a", fetch)).toHaveLength(250);
    expect(calls).toEqual(["a@", "a@100", "a@200"]);
  });
});
