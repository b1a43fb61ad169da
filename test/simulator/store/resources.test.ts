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
  workspace: "ws", kind: "volume", parent: "", name, createdMs, status: "DEPLOYED", doc: { metadata: { name }, ...extra },
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
});
