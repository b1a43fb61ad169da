import { describe, expect, it } from "vitest";
import { migrate, openDatabase } from "../../../src/sqlite.js";
import { SIMULATOR_MIGRATIONS } from "../../../simulator/store/migrations.js";
import { ResourceStore, type StoredResource } from "../../../simulator/store/resources.js";

function open() {
  const db = openDatabase(":memory:");
  migrate(db, SIMULATOR_MIGRATIONS);
  return { db, store: new ResourceStore(db) };
}

const item = (name: string, createdMs: number, extra: Record<string, unknown> = {}): StoredResource => ({
  workspace: "ws",
  kind: "volume",
  parent: "",
  name,
  createdMs,
  status: "DEPLOYED",
  doc: { metadata: { name }, ...extra },
});

const names = (items: StoredResource[]) => items.map((i) => i.name);

describe("ResourceStore cache", () => {
  it("lists the resource inserted under a rowid SQLite reused after a delete, not the deleted one", () => {
    const { store } = open();
    store.insert(item("a", 1));
    store.insert(item("b", 2));
    expect(names(store.list({ workspace: "ws", kind: "volume", sort: "createdAt:asc" }))).toEqual(["a", "b"]);
    expect(store.delete("ws", "volume", "b")).toBe(true);
    store.insert(item("c", 3)); // takes b's rowid (the largest rowid was freed)
    expect(names(store.list({ workspace: "ws", kind: "volume", sort: "createdAt:asc" }))).toEqual(["a", "c"]);
    expect(store.get("ws", "volume", "b")).toBeUndefined();
    expect(store.get("ws", "volume", "c")?.name).toBe("c");
    expect(store.delete("ws", "volume", "b")).toBe(false);
  });

  it("serves documents written by another store instance after clearCache (reads from SQLite on a miss)", () => {
    const { db, store } = open();
    store.insert(item("a", 1, { spec: { size: 1 } }));
    expect(store.get("ws", "volume", "a")?.doc.spec).toEqual({ size: 1 });
    const other = new ResourceStore(db);
    const a = other.get("ws", "volume", "a")!;
    a.doc.spec = { size: 2 };
    other.update(a);
    store.clearCache();
    expect(store.list({ workspace: "ws", kind: "volume", sort: "name:asc" })[0]!.doc.spec).toEqual({ size: 2 });
    expect(store.allOfKind("ws", ["volume"])[0]!.doc.spec).toEqual({ size: 2 });
  });

  it("keeps the saved object after update, for get, list and allOfKind alike", () => {
    const { store } = open();
    store.insert(item("a", 1));
    const replaced = { ...item("a", 1), status: "FAILED", doc: { metadata: { name: "a" }, status: "FAILED" } };
    store.update(replaced);
    expect(store.get("ws", "volume", "a")).toBe(replaced);
    expect(store.list({ workspace: "ws", kind: "volume", sort: "createdAt:desc" })[0]).toBe(replaced);
    expect(store.allOfKind("ws", ["volume"])[0]).toBe(replaced);
    expect(store.list({ workspace: "ws", kind: "volume", sort: "createdAt:desc", statuses: ["FAILED"] })).toHaveLength(1);
  });

  it("pages by keyset after a position", () => {
    const { store } = open();
    for (let i = 0; i < 5; i++) store.insert(item(`v${i}`, 10 + Math.floor(i / 2)));
    const page = store.list({ workspace: "ws", kind: "volume", sort: "createdAt:desc", after: { createdMs: 11, name: "v3" }, limit: 2 });
    expect(names(page)).toEqual(["v2", "v1"]);
  });

  it("answers a list query asked again with every insert, update (status, search text) and delete of that kind since", () => {
    const { store } = open();
    const filter = { workspace: "ws", kind: "volume", sort: "createdAt:asc" as const, limit: 10 };
    store.insert(item("a", 1));
    expect(names(store.list(filter))).toEqual(["a"]);
    store.insert(item("b", 2));
    expect(names(store.list(filter))).toEqual(["a", "b"]);
    expect(names(store.list({ ...filter, statuses: ["FAILED"] }))).toEqual([]);
    const b = store.get("ws", "volume", "b")!;
    b.status = "FAILED";
    store.update(b);
    expect(names(store.list({ ...filter, statuses: ["FAILED"] }))).toEqual(["b"]);
    expect(names(store.list({ ...filter, q: "renamed" }))).toEqual([]);
    b.doc = { metadata: { name: "b", displayName: "Renamed" } };
    store.update(b);
    expect(names(store.list({ ...filter, q: "renamed" }))).toEqual(["b"]);
    store.delete("ws", "volume", "a");
    expect(names(store.list(filter))).toEqual(["b"]);
    // Another kind's writes leave this kind's answers alone, and the other kind sees its own.
    store.insert({ ...item("s", 3), kind: "sandbox" });
    expect(names(store.list(filter))).toEqual(["b"]);
    expect(names(store.list({ ...filter, kind: "sandbox" }))).toEqual(["s"]);
  });

  it("answers allOfKind asked again with the inserts and deletes of that kind since, for one kind or several", () => {
    const { store } = open();
    store.insert(item("a", 1));
    expect(names(store.allOfKind("ws", ["volume"]))).toEqual(["a"]);
    store.insert(item("b", 2));
    expect(names(store.allOfKind("ws", ["volume"])).sort()).toEqual(["a", "b"]);
    store.delete("ws", "volume", "a");
    expect(names(store.allOfKind("ws", ["volume"]))).toEqual(["b"]);
    expect(names(store.allOfKind("ws", ["sandbox"]))).toEqual([]);
    store.insert({ ...item("s", 3), kind: "sandbox" });
    expect(names(store.allOfKind("ws", ["sandbox"]))).toEqual(["s"]);
    expect(names(store.allOfKind("ws", ["volume", "sandbox"])).sort()).toEqual(["b", "s"]);
    expect(names(store.allOfKind("other", ["volume"]))).toEqual([]);
  });
});

describe("ResourceStore rendered JSON", () => {
  const render = (i: StoredResource) => () => ({ name: i.name, status: i.status, doc: i.doc });

  it("renders once per item and variant, and keeps variants apart", () => {
    const { store } = open();
    store.insert(item("a", 1, { secret: "s" }));
    const a = store.get("ws", "volume", "a")!;
    let calls = 0;
    const masked = () => (calls++, { secret: "***" });
    expect(store.renderedJson(a, "masked", masked)).toBe('{"secret":"***"}');
    expect(store.renderedJson(a, "masked", masked)).toBe('{"secret":"***"}');
    expect(calls).toBe(1);
    expect(store.renderedJson(a, "shown", () => ({ secret: a.doc.secret }))).toBe('{"secret":"s"}');
    expect(store.renderedJson(a, "masked", masked)).toBe('{"secret":"***"}');
    expect(store.renderedJson(a, "none", () => undefined)).toBe("null");
  });

  it("renders again after update() of the same object changed in place", () => {
    const { store } = open();
    store.insert(item("a", 1, { spec: { size: 1 } }));
    const a = store.list({ workspace: "ws", kind: "volume", sort: "name:asc" })[0]!;
    expect(store.renderedJson(a, "v", render(a))).toContain('"size":1');
    (a.doc.spec as { size: number }).size = 2;
    store.update(a);
    const listed = store.list({ workspace: "ws", kind: "volume", sort: "name:asc" })[0]!;
    expect(store.renderedJson(listed, "v", render(listed))).toContain('"size":2');
  });

  it("renders again after update() of another object for the same key", () => {
    const { store } = open();
    store.insert(item("a", 1));
    const a = store.get("ws", "volume", "a")!;
    expect(store.renderedJson(a, "v", render(a))).toContain('"DEPLOYED"');
    store.update({ ...a, status: "FAILED", doc: { metadata: { name: "a" }, status: "FAILED" } });
    // The old object's texts are dropped too (a caller still holding it).
    expect(store.renderedJson(a, "v", () => "fresh")).toBe('"fresh"');
    const b = store.get("ws", "volume", "a")!;
    expect(store.renderedJson(b, "v", render(b))).toContain('"FAILED"');
  });

  it("serves no text of a deleted item, nor of the item that reuses its rowid", () => {
    const { store } = open();
    store.insert(item("a", 1));
    store.insert(item("b", 2, { gen: 1 }));
    const b = store.get("ws", "volume", "b")!;
    expect(store.renderedJson(b, "v", render(b))).toContain('"gen":1');
    store.delete("ws", "volume", "b");
    expect(store.renderedJson(b, "v", () => "dropped")).toBe('"dropped"');
    store.insert(item("b", 3, { gen: 2 }));
    const again = store.list({ workspace: "ws", kind: "volume", sort: "name:asc" })[1]!;
    expect(store.renderedJson(again, "v", render(again))).toContain('"gen":2');
  });

  it("does not serve a text rendered from a document the item no longer holds", () => {
    const { store } = open();
    store.insert(item("a", 1, { gen: 1 }));
    const a = store.get("ws", "volume", "a")!;
    expect(store.renderedJson(a, "v", render(a))).toContain('"gen":1');
    a.doc = { metadata: { name: "a" }, gen: 2 };
    expect(store.renderedJson(a, "v", render(a))).toContain('"gen":2');
    a.status = "FAILED";
    expect(store.renderedJson(a, "v", render(a))).toContain('"FAILED"');
  });

  it("forgets every text on clearCache", () => {
    const { store } = open();
    store.insert(item("a", 1));
    const a = store.get("ws", "volume", "a")!;
    store.renderedJson(a, "v", () => "old");
    store.clearCache();
    expect(store.renderedJson(a, "v", () => "new")).toBe('"new"');
  });
});
