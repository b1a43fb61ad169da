import express from "express";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { parseUsageEvents } from "../../../simulator/metrics/ingest.js";
import { parseUsageEventsText } from "../../../simulator/metrics/ingest-text.js";
import { metricsApp, wireEvent } from "./harness.js";

const ev = (over: Record<string, unknown> = {}) => wireEvent(over);

/** What the hook did before the sliced reader: express.json, then parseUsageEvents. */
const reference = express();
reference.post("/", express.json({ limit: "64mb" }), (req, res) => {
  try {
    const { events, ts, label } = parseUsageEvents(req.body);
    res.json({
      ok: outcome(
        events,
        Array.from(ts),
        events.map((e) => e.usage),
        label,
      ),
    });
  } catch (err) {
    res.json({ err: (err as Error).message });
  }
});
reference.use((err: { type?: string; message: string }, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
  res.json({ err: `${err.type}|${err.message}` });
});

type Fields = { workspace: string; resourceType: string; resourceName: string; resourceUuid: string; billingDimension: string };
const outcome = (events: Fields[], ts: number[], usage: number[], label: string) =>
  JSON.stringify([events.map((e) => [e.workspace, e.resourceType, e.resourceName, e.resourceUuid, e.billingDimension]), ts, usage, label]);

function sliced(body: string, sliceChars: number): unknown {
  try {
    const r = parseUsageEventsText(body, sliceChars);
    return { ok: outcome(r.events, Array.from(r.ts), Array.from(r.usage), r.label) };
  } catch (err) {
    const e = err as { type?: string; message: string };
    return { err: e.type ? `${e.type}|${e.message}` : e.message };
  }
}

describe("the hook's sliced body reader", () => {
  const bodies = [
    JSON.stringify(Array.from({ length: 40 }, (_, i) => ev({ usage: i / 3, resourceUuid: `u-${i % 5}` }))),
    JSON.stringify({ events: [ev(), ev({ timestamp: "2026-04-01T10:00:00+02:00" }), ev({ usage: 0 })] }),
    // Cuts at "},{" inside strings or deeper than the array's elements must not change anything.
    JSON.stringify([ev({ resourceName: "a},{b" }), ev({ resourceName: '},{"usage":1},{' }), ev(), ev({ usage: 2 })]),
    `[${JSON.stringify(ev())},{"usage":[{},{}]},${JSON.stringify(ev())}]`,
    JSON.stringify([ev(), ev({ usage: -1 }), ev()]),
    JSON.stringify([ev(), ev({ timestamp: "2026-04-01" }), ev()]),
    JSON.stringify([ev(), ev({ colour: "red" }), ev()]),
    JSON.stringify([ev(), { ...ev(), usage: undefined }, ev()]),
    JSON.stringify([ev()], null, 2),
    '[{"a":1},{"b":2}',
    '{"events":[],"events":[1]}',
    "[]",
    " [ ] ",
    "",
    "5",
    "  x",
    '"s"',
    "[{",
    "{}",
    '{"events": [], "more": 1}',
  ];

  it("gives what express.json and parseUsageEvents gave, for any slice size", async () => {
    for (const body of bodies) {
      const res = await request(reference).post("/").set("Content-Type", "application/json").send(body);
      for (const sliceChars of [1, 7, 50, 1e9]) expect(sliced(body, sliceChars), `${body} @${sliceChars}`).toEqual(res.body);
    }
  });

  it("shares one fields object per resource and dimension", () => {
    const r = parseUsageEventsText(JSON.stringify([ev(), ev({ usage: 1 }), ev({ resourceUuid: "u-2" }), ev()]), 10);
    expect(new Set(r.events).size).toBe(2);
    expect(Array.from(r.usage)).toEqual([3600, 1, 3600, 3600]);
  });

  it("leaves bodies it does not read as utf-8 text to express.json (a charset it refuses is still 415)", async () => {
    const { app } = metricsApp();
    const latin1 = await request(app)
      .post("/_sim/usage-events")
      .set("Content-Type", "application/json; charset=latin1")
      .send(JSON.stringify([ev()]));
    expect(latin1.status).toBe(415);
    const strict = await request(app).post("/_sim/usage-events").set("Content-Type", "application/json").send("5");
    expect(strict.status).toBe(400);
    expect(strict.body.message).toMatch(/^invalid JSON body: /);
    const ok = await request(app)
      .post("/_sim/usage-events")
      .set("Content-Type", "application/json; charset=UTF-8")
      .send(JSON.stringify([ev(), ev()]));
    expect(ok.body).toEqual({ ingested: 2 });
  });
});
