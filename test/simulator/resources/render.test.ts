import { describe, expect, it } from "vitest";
import { withLiveFields } from "../../../simulator/resources/render.js";

/** A cached document text with read-time fields added must be the bytes JSON.stringify({...doc, ...live}) gives. */
describe("withLiveFields", () => {
  const doc = { metadata: { name: "a" }, spec: { runtime: { ttl: "1h" } }, status: "DEPLOYED" };
  const same = (d: object, live: Record<string, unknown> | undefined) => {
    const text = withLiveFields(JSON.stringify(d), d, live);
    expect(text).toBe(JSON.stringify({ ...d, ...live }));
  };

  it("appends new fields in order, and leaves the text alone without any", () => {
    same(doc, { expiresIn: 3599 });
    same(doc, { expiresIn: 0, other: { nested: [1, "x"] } });
    same(doc, undefined);
    same(doc, {});
    same(doc, { gone: undefined });
    same({}, { expiresIn: 5 });
  });

  it("gives up (undefined) when a live field replaces one of the document's", () => {
    expect(withLiveFields(JSON.stringify(doc), doc, { spec: { expired: true } })).toBeUndefined();
    expect(withLiveFields(JSON.stringify(doc), doc, { expiresIn: 1, status: "X" })).toBeUndefined();
  });
});
