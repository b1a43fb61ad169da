import { describe, expect, it } from "vitest";
import { CursorCodec, stableStringify } from "../../src/cursor.js";

describe("CursorCodec", () => {
  let now = 1_000_000;
  const codec = new CursorCodec({ secret: "k", now: () => now });
  const query = { workspace: "w", sort: "createdAt:desc", q: "x" };

  it("round-trips a position for the same query (key order irrelevant)", () => {
    const c = codec.encode({ after: "b" }, query);
    expect(codec.decode(c, { q: "x", sort: "createdAt:desc", workspace: "w" })).toEqual({ after: "b" });
  });
  it("rejects a cursor reused with another query", () => {
    const c = codec.encode(1, query);
    expect(() => codec.decode(c, { ...query, workspace: "other" })).toThrow(/different query/);
  });
  it("rejects a tampered cursor", () => {
    const c = codec.encode(1, query);
    const [payload, sig] = c.split(".");
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, "base64url").toString()), p: 99 })).toString("base64url");
    expect(() => codec.decode(`${forged}.${sig}`, query)).toThrow(/invalid cursor/);
    expect(() => codec.decode("garbage", query)).toThrow(/invalid cursor/);
  });
  it("rejects a cursor older than 24 h", () => {
    const c = codec.encode(1, query);
    now += 24 * 3_600_000 + 1;
    expect(() => codec.decode(c, query)).toThrow(/expired/);
  });
  it("accepts a cursor signed by another codec with the same secret (checked by signature, not remembered)", () => {
    const sibling = new CursorCodec({ secret: "k", now: () => now });
    const c = sibling.encode({ after: "z" }, query);
    expect(codec.decode(c, query)).toEqual({ after: "z" });
    expect(() => codec.decode(c, { ...query, q: "y" })).toThrow(/different query/);
  });
  it("binds to the query's content, not to the object passed (a new object of the same query decodes, another query does not)", () => {
    const binding = { ...query };
    const c = codec.encode(2, binding);
    expect(codec.decode(c, binding)).toBe(2);
    expect(codec.decode(c, { ...query })).toBe(2);
    expect(() => codec.decode(c, { ...query, sort: "name:asc" })).toThrow(/different query/);
  });
  it("writes a binding as JSON with sorted keys, leaving out undefined values", () => {
    expect(stableStringify({ b: 1, a: undefined, c: [1, { y: 2, x: null }], d: {} })).toBe('{"b":1,"c":[1,{"x":null,"y":2}],"d":{}}');
    expect(stableStringify({ a: undefined })).toBe("{}");
    expect(stableStringify(undefined)).toBe("null");
  });
  it("rejects cursors signed with another secret", () => {
    const other = new CursorCodec({ secret: "other", now: () => now });
    expect(() => codec.decode(other.encode(1, query), query)).toThrow(/invalid cursor/);
  });
});
