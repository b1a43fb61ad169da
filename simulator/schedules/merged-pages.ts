import { errors } from "../../src/errors.js";
import type { CursorCodec } from "../../src/cursor.js";
import type { Page } from "../../src/pagination.js";

/**
 * One createdAt-ordered page over several sandboxes' agents, each paged by
 * its own opaque cursor. The merged cursor (signed by the simulator's
 * CursorCodec, bound to the query) records, per sandbox, the agent page the
 * next unread item sits on and how far into it we read, plus the id of the
 * last item read there: an item deleted meanwhile (trimmed executions) does
 * not shift the resume point. Sandboxes that appear between pages only
 * contribute items that sort after the last one returned.
 */

export interface AgentPage<T> {
  data: T[];
  meta: { hasMore: boolean; nextCursor: string; total: number };
}

/** Fetches one agent page (cursor "" = the first). */
export type FetchPage<T> = (sandbox: string, cursor: string, limit: number) => Promise<AgentPage<T>>;

interface StreamState {
  /** Agent cursor of the page ("" = first page). */
  c: string;
  /** Items of that page already read. */
  n: number;
  /** Id of the last item read on that page. */
  id?: string;
}

interface Position {
  s: Record<string, StreamState>;
  /** createdAt of the last item returned. */
  at?: string;
}

export interface MergeRequest<T> {
  sandboxes: string[];
  fetch: FetchPage<T>;
  limit: number;
  sort: "createdAt:desc" | "createdAt:asc";
  keep?: (item: T) => boolean;
  cursor?: string;
  cursors: CursorCodec;
  /** What the cursor is bound to (workspace, list, filters, sort). */
  binding: unknown;
}

/** Items per agent request: the agents' maximum, so a page rarely needs a second round trip. */
export const AGENT_PAGE = 100;

type Item = { id: string; createdAt: string };

class Stream<T extends Item> {
  private items: T[] = [];
  private index = 0;
  private pageCursor = "";
  private more = true;
  private loaded = false;
  total = 0;

  constructor(
    readonly sandbox: string,
    private readonly fetch: FetchPage<T>,
    private readonly keep: (item: T) => boolean,
    private readonly start: StreamState = { c: "", n: 0 },
  ) {}

  async peek(): Promise<T | undefined> {
    if (!this.loaded) await this.load(this.start.c, this.start);
    for (;;) {
      while (this.index < this.items.length) {
        const item = this.items[this.index]!;
        if (this.keep(item)) return item;
        this.index++;
      }
      if (!this.more) return undefined;
      await this.load(this.nextCursor, undefined);
    }
  }

  take(): void {
    this.index++;
  }

  state(): StreamState {
    const id = this.index > 0 ? this.items[this.index - 1]?.id : undefined;
    return { c: this.pageCursor, n: this.index, ...(id ? { id } : {}) };
  }

  private nextCursor = "";

  private async load(cursor: string, resume: StreamState | undefined): Promise<void> {
    const page = await this.fetch(this.sandbox, cursor, AGENT_PAGE);
    if (!this.loaded) this.total = page.meta.total;
    this.loaded = true;
    this.items = page.data;
    this.pageCursor = cursor;
    this.nextCursor = page.meta.nextCursor;
    this.more = page.meta.hasMore && page.meta.nextCursor !== "";
    this.index = 0;
    if (resume && resume.n > 0) {
      const at = resume.id === undefined ? -1 : this.items.findIndex((i) => i.id === resume.id);
      this.index = at >= 0 ? at + 1 : Math.min(resume.n, this.items.length);
    }
  }
}

export async function mergedPage<T extends Item>(req: MergeRequest<T>): Promise<Page<T>> {
  const position = req.cursor ? req.cursors.decode<Position>(req.cursor, req.binding) : undefined;
  if (position !== undefined && (typeof position !== "object" || typeof position.s !== "object" || position.s === null))
    throw errors.badRequest("cursor: invalid cursor");
  const desc = req.sort === "createdAt:desc";
  // Does a sort before b?
  const before = (a: string, b: string) => (desc ? a > b : a < b);
  const keep = req.keep ?? (() => true);
  const streams = [...req.sandboxes].sort().map((sandbox) => {
    const state = position?.s[sandbox];
    const at = position?.at;
    const fresh = position !== undefined && state === undefined && at !== undefined;
    return new Stream<T>(sandbox, req.fetch, fresh ? (i) => keep(i) && before(at, i.createdAt) : keep, state);
  });
  const data: T[] = [];
  let hasMore = false;
  const heads: (T | undefined)[] = await Promise.all(streams.map((s) => s.peek()));
  for (;;) {
    let best = -1;
    for (let i = 0; i < streams.length; i++) {
      const head = heads[i];
      if (head && (best < 0 || before(head.createdAt, heads[best]!.createdAt))) best = i;
    }
    if (best < 0) break;
    if (data.length === req.limit) {
      hasMore = true;
      break;
    }
    data.push(heads[best]!);
    streams[best]!.take();
    heads[best] = await streams[best]!.peek();
  }
  const total = streams.reduce((sum, s) => sum + s.total, 0);
  if (!hasMore) return { data, meta: { hasMore, nextCursor: "", total } };
  const next: Position = { s: Object.fromEntries(streams.map((s) => [s.sandbox, s.state()])), at: data[data.length - 1]?.createdAt ?? position?.at };
  return { data, meta: { hasMore, nextCursor: req.cursors.encode(next, req.binding), total } };
}

/** Every item of one agent list, page after page (lists of API versions before paging). */
export async function everything<T>(sandbox: string, fetch: FetchPage<T>): Promise<T[]> {
  const all: T[] = [];
  for (let cursor = ""; ;) {
    const page = await fetch(sandbox, cursor, AGENT_PAGE);
    all.push(...page.data);
    if (!page.meta.hasMore || !page.meta.nextCursor) return all;
    cursor = page.meta.nextCursor;
  }
}
