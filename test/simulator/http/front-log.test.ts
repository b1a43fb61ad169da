import { Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "../../../src/logging.js";
import { createSimulatorApp } from "../../../simulator/app.js";
import { openSimulator } from "../../../simulator/root.js";
import { ADMIN_KEY, api } from "../../helpers/simulator.js";

/**
 * The front writes one line per answered operation once its reply is
 * finished: warn for a 4xx, error for a 5xx, info for the rest. Requests
 * without a body are answered in the listener's own turn (and with test
 * hooks off), so both paths are run here: test hooks off, gets and a create.
 */
function simWithLines(level: string) {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n")) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = createLogger({ level, destination });
  const runtime = openSimulator({ apiKey: ADMIN_KEY, testHooks: false }, { logger });
  return { lines, runtime, client: api(createSimulatorApp(runtime.deps)) };
}

const requestLines = (lines: Record<string, unknown>[]) => lines.filter((l) => l.msg === "request").map((l) => [l.level, l.method, l.url, l.status]);

describe("request log lines of the front", () => {
  const warn = simWithLines("warn");
  const debug = simWithLines("info");
  afterAll(() => {
    warn.runtime.close();
    debug.runtime.close();
  });

  it("at warn: a line for each 4xx (bodiless or not), none for a success", async () => {
    await warn.client.post("/v0/volumes", { metadata: { name: "logged" } }).expect(200);
    await warn.client.get("/v0/volumes/logged").expect(200);
    await warn.client.get("/v0/volumes/missing").expect(404);
    await warn.client.post("/v0/volumes", { metadata: { name: "logged" } }).expect(409);
    await new Promise((resolve) => setTimeout(resolve, 50)); // pino writes asynchronously
    expect(requestLines(warn.lines)).toEqual([
      [40, "GET", "/v0/volumes/missing", 404],
      [40, "POST", "/v0/volumes", 409],
    ]);
  });

  it("at info (the default): a line for every operation, successes included", async () => {
    await debug.client.post("/v0/volumes", { metadata: { name: "logged" } }).expect(200);
    await debug.client.get("/v0/volumes/logged").expect(200);
    await debug.client.get("/v0/volumes").expect(200);
    await debug.client.get("/v0/volumes/missing").expect(404);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(requestLines(debug.lines)).toEqual([
      [30, "POST", "/v0/volumes", 200],
      [30, "GET", "/v0/volumes/logged", 200],
      [30, "GET", "/v0/volumes", 200],
      [40, "GET", "/v0/volumes/missing", 404],
    ]);
  });
});
