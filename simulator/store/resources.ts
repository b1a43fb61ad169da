import type { Statement } from "better-sqlite3";
import type { Db } from "../../src/sqlite.js";
import {
  ALL_OF_KIND,
  CACHE_LIMIT,
  cacheKey,
  keyOf,
  listQuery,
  PAGES_PER_KIND,
  searchText,
  toStored,
  type ListFilter,
  type RenderedEntry,
  type ResourceChange,
  type Row,
  type StoredResource,
} from "./resource-rows.js";

/** The rows' types and searchText (resource-rows.ts), importable from here as before. */
export { searchText, type ListFilter, type ResourceChange, type StoredResource } from "./resource-rows.js";

/**
 * The generic resource table. Statements are prepared once (list statements
 * once per filter combination, cached by their SQL).
 *
 * Parsed documents are kept in memory by rowid (and the rowid by key): every
 * write goes through this store (and whole-table wipes call clearCache), so a
 * read costs an index lookup and no JSON parsing, and a list page reads only
 * rowids from the covering index (building [rowid, parent, name, created_ms]
 * rows cost 3x more than the SQL seek itself). The rowids of a list query are
 * kept too, by its SQL and parameters, until the next insert, update or delete
 * of that workspace and kind. Callers that change a document
 * must save it with update(); they get the cached object itself.
 *
 * The JSON text of a rendered item (renderedJson) is kept too, by item and
 * variant (e.g. secrets masked or shown): a list page is then the join of
 * cached strings. It lives exactly as long as the parsed document it was
 * rendered from: update() and delete() drop it, and it is only served while
 * the item still holds the same document object and status.
 */
export class ResourceStore {
  readonly #db: Db;
  readonly #get: Statement;
  readonly #insert: Statement;
  readonly #update: Statement;
  readonly #delete: Statement;
  readonly #deleteChildren: Statement;
  readonly #count: Statement;
  readonly #countAll: Statement;
  readonly #byStatement = new Map<string, Statement>();
  readonly #byRowid: Statement;
  /** Rowid by key; deletes and updates learn the rowid from RETURNING. */
  readonly #rowids = new Map<string, number>();
  readonly #cache = new Map<number, StoredResource<unknown>>();
  readonly #counts = new Map<string, number>();
  /** Rowids of list queries by workspace and kind, then by SQL and parameters: dropped by any write to that kind. */
  readonly #pages = new Map<string, Map<string, number[]>>();
  #rendered = new WeakMap<StoredResource<unknown>, RenderedEntry>();
  readonly #listeners: ((change: ResourceChange) => void)[] = [];

  constructor(db: Db) {
    this.#db = db;
    this.#byRowid = db.prepare("SELECT * FROM resources WHERE rowid = ?");
    this.#get = db.prepare("SELECT rowid AS id, * FROM resources WHERE workspace = ? AND kind = ? AND parent = ? AND name = ?");
    this.#insert = db.prepare(
      "INSERT INTO resources (workspace, kind, parent, name, created_ms, status, search, doc) VALUES (@workspace, @kind, @parent, @name, @createdMs, @status, @search, @doc)",
    );
    this.#update = db
      .prepare(
        "UPDATE resources SET status = @status, search = @search, doc = @doc WHERE workspace = @workspace AND kind = @kind AND parent = @parent AND name = @name RETURNING rowid",
      )
      .pluck(true);
    // SQLite may hand a deleted rowid to the next insert: the cache forgets it by the rowid RETURNING gives.
    this.#delete = db.prepare("DELETE FROM resources WHERE workspace = ? AND kind = ? AND parent = ? AND name = ? RETURNING rowid").pluck(true);
    // Children of a resource live under parent = "<name>" or "<name>/<child>".
    this.#deleteChildren = db.prepare(
      "DELETE FROM resources WHERE workspace = ? AND kind IN (SELECT value FROM json_each(?)) AND (parent = ? OR parent LIKE ? ESCAPE '\\')",
    );
    this.#count = db.prepare("SELECT COUNT(*) AS n FROM resources WHERE workspace = ? AND kind = ? AND parent = ?");
    this.#countAll = db.prepare("SELECT COUNT(*) AS n FROM resources WHERE workspace = ? AND kind = ?");
  }

  get<D = Record<string, unknown>>(workspace: string, kind: string, name: string, parent = ""): StoredResource<D> | undefined {
    const key = cacheKey(workspace, kind, parent, name);
    const rowid = this.#rowids.get(key);
    const cached = rowid === undefined ? undefined : this.#cache.get(rowid);
    if (cached) return cached as StoredResource<D>;
    const row = this.#get.get(workspace, kind, parent, name) as (Row & { id: number }) | undefined;
    return row ? this.#remember(row.id, toStored<D>(row)) : undefined;
  }

  /**
   * Called after every insert, update and delete of one resource through this store, so what follows a
   * resource's life (usage metering) is wired once by the composition root, not repeated by each writer.
   * Not called for SQL that bypasses the store (deleteChildren, a workspace deletion, a reset).
   */
  onChange(listener: (change: ResourceChange) => void): void {
    this.#listeners.push(listener);
  }

  #changed(type: ResourceChange["type"], item: StoredResource<object>): void {
    for (const listener of this.#listeners) listener({ type, item });
  }

  /** Forgets every parsed document (after SQL that bypasses this store, e.g. a workspace deletion or a reset). */
  clearCache(): void {
    this.#cache.clear();
    this.#rowids.clear();
    this.#counts.clear();
    this.#pages.clear();
    this.#rendered = new WeakMap();
  }

  /**
   * `render()` as JSON text, computed once per item and variant: the variant
   * names everything the rendering depends on besides the document (e.g.
   * "masked" / "shown"). The caller settles time-driven changes (status moves)
   * and saves them with update() before asking, so a cached text is never
   * older than the document.
   */
  renderedJson(item: StoredResource<unknown>, variant: string, render: () => unknown): string {
    let entry = this.#rendered.get(item);
    if (!entry || entry.doc !== item.doc || entry.status !== item.status) {
      entry = { doc: item.doc, status: item.status, texts: new Map() };
      this.#rendered.set(item, entry);
    }
    let text = entry.texts.get(variant);
    if (text === undefined) {
      // JSON.stringify(undefined) is undefined; in an array it is written as null.
      text = JSON.stringify(render()) ?? "null";
      entry.texts.set(variant, text);
    }
    return text;
  }

  /** After a write of this workspace and kind: its counts and list pages (an update can move an item in or out of a status or `q` filter). */
  #forgetCounts(workspace: string, kind: string): void {
    const prefix = `${workspace}\u0000${kind}\u0000`;
    for (const key of this.#counts.keys()) if (key.startsWith(prefix)) this.#counts.delete(key);
    this.#pages.delete(prefix);
  }

  /** The kept rowids of the list queries of a workspace and kind (see list() and allOfKind()). */
  #pagesOf(workspace: string, kind: string): Map<string, number[]> {
    const prefix = `${workspace}\u0000${kind}\u0000`;
    let pages = this.#pages.get(prefix);
    if (!pages) this.#pages.set(prefix, (pages = new Map()));
    return pages;
  }

  #remember<D>(rowid: number, item: StoredResource<D>): StoredResource<D> {
    if (this.#cache.size >= CACHE_LIMIT) {
      this.#cache.clear();
      this.#rowids.clear();
    }
    this.#cache.set(rowid, item as StoredResource<unknown>);
    this.#rowids.set(cacheKey(item.workspace, item.kind, item.parent, item.name), rowid);
    return item;
  }

  #forget(key: string): void {
    const rowid = this.#rowids.get(key);
    if (rowid === undefined) return;
    this.#rowids.delete(key);
    this.#dropRowid(rowid);
  }

  /** Forgets the parsed document under `rowid` and its rendered texts. */
  #dropRowid(rowid: number): void {
    const cached = this.#cache.get(rowid);
    if (cached) this.#rendered.delete(cached);
    this.#cache.delete(rowid);
  }

  /** Inserts; returns false when the key exists already. */
  insert(item: StoredResource<object>): boolean {
    const result = this.#insert.run({
      ...keyOf(item),
      createdMs: item.createdMs,
      status: item.status,
      search: searchText(item.doc),
      doc: JSON.stringify(item.doc),
    });
    if (result.changes === 1) {
      this.#remember(Number(result.lastInsertRowid), item);
      this.#forgetCounts(item.workspace, item.kind);
      this.#changed("saved", item);
    }
    return result.changes === 1;
  }

  tryInsert(item: StoredResource<object>): boolean {
    try {
      return this.insert(item);
    } catch (err) {
      if ((err as { code?: string }).code === "SQLITE_CONSTRAINT_PRIMARYKEY") return false;
      throw err;
    }
  }

  update(item: StoredResource<object>): void {
    const rowid = this.#update.get({ ...keyOf(item), status: item.status, search: searchText(item.doc), doc: JSON.stringify(item.doc) }) as number | undefined;
    // The saved object may be the cached one changed in place: its rendered texts go either way.
    this.#rendered.delete(item);
    this.#pages.delete(`${item.workspace}\u0000${item.kind}\u0000`);
    if (rowid !== undefined) {
      this.#dropRowid(rowid);
      this.#remember(rowid, item);
      this.#changed("saved", item);
    }
  }

  delete(workspace: string, kind: string, name: string, parent = ""): boolean {
    const gone = this.#listeners.length > 0 ? this.get(workspace, kind, name, parent) : undefined;
    this.#forget(cacheKey(workspace, kind, parent, name));
    this.#forgetCounts(workspace, kind);
    const rowid = this.#delete.get(workspace, kind, parent, name) as number | undefined;
    if (rowid !== undefined) this.#dropRowid(rowid);
    if (rowid !== undefined && gone) this.#changed("deleted", gone as StoredResource);
    return rowid !== undefined;
  }

  /** Removes the child resources (previews, schedules, ...) of `parentKey` of the given kinds. */
  deleteChildren(workspace: string, kinds: string[], parentKey: string): void {
    const escaped = parentKey.replace(/[\\%_]/g, (c) => `\\${c}`);
    this.#deleteChildren.run(workspace, JSON.stringify(kinds), parentKey, `${escaped}/%`);
    this.clearCache();
  }

  /** Items of a list (meta.total), kept until an insert or delete of that kind in that workspace. */
  count(workspace: string, kind: string, parent: string | null = ""): number {
    const key = `${workspace}\u0000${kind}\u0000${parent ?? "\u0001"}`;
    let n = this.#counts.get(key);
    if (n === undefined) {
      n = parent === null ? (this.#countAll.get(workspace, kind) as { n: number }).n : (this.#count.get(workspace, kind, parent) as { n: number }).n;
      this.#counts.set(key, n);
    }
    return n;
  }

  list<D = Record<string, unknown>>(filter: ListFilter): StoredResource<D>[] {
    const { sql, params } = listQuery(filter);
    // The same page asked again before any write of this kind reads the same rowids (clients walk lists page by page).
    const pages = this.#pagesOf(filter.workspace, filter.kind);
    const pageKey = `${sql}\u0000${JSON.stringify(params)}`;
    let rowids = pages.get(pageKey);
    if (rowids === undefined) {
      let statement = this.#byStatement.get(sql);
      if (!statement) {
        statement = this.#db.prepare(sql).pluck(true);
        this.#byStatement.set(sql, statement);
      }
      rowids = statement.all(params) as number[];
      if (pages.size >= PAGES_PER_KIND) pages.clear();
      pages.set(pageKey, rowids);
    }
    const items = new Array<StoredResource<D>>(rowids.length);
    for (let i = 0; i < rowids.length; i++) {
      const rowid = rowids[i]!;
      items[i] = (this.#cache.get(rowid) as StoredResource<D> | undefined) ?? this.#remember(rowid, toStored<D>(this.#byRowid.get(rowid) as Row));
    }
    return items;
  }

  /** Every resource of a kind across workspaces (lifecycle sweeps, usages). */
  allOfKind<D = Record<string, unknown>>(workspace: string, kinds: string[]): StoredResource<D>[] {
    // One kind (e.g. a volume create looks for the sandboxes using it): its rowids are kept like a list page's.
    const pages = kinds.length === 1 ? this.#pagesOf(workspace, kinds[0]!) : undefined;
    let rowids = pages?.get(ALL_OF_KIND);
    if (rowids === undefined) {
      // Rowids from the primary-key index; documents (parsed) from the cache, read on a miss.
      const sql = "SELECT rowid FROM resources WHERE workspace = ? AND kind IN (SELECT value FROM json_each(?))";
      let statement = this.#byStatement.get(sql);
      if (!statement) {
        statement = this.#db.prepare(sql).pluck(true);
        this.#byStatement.set(sql, statement);
      }
      rowids = statement.all(workspace, JSON.stringify(kinds)) as number[];
      if (pages) {
        if (pages.size >= PAGES_PER_KIND) pages.clear();
        pages.set(ALL_OF_KIND, rowids);
      }
    }
    return rowids.map(
      (rowid) => (this.#cache.get(rowid) as StoredResource<D> | undefined) ?? this.#remember(rowid, toStored<D>(this.#byRowid.get(rowid) as Row)),
    );
  }
}
