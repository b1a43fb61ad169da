import { checkEvent, MAX_BATCH_EVENTS, parseUsageEvents } from "./ingest.js";
import type { UsageFields } from "./usage-store.js";

/**
 * The bulk hook's body, parsed in slices. JSON.parse of a whole
 * 50,000-event body keeps 50,000 objects and 300,000 strings alive until the
 * batch is stored: the young-generation collections that run meanwhile copy
 * and promote all of them, about a quarter of the simulator's ingest CPU
 * (measured with a gc PerformanceObserver). Here the array is parsed ~1,000
 * events at a time, each slice checked and copied into columns (times,
 * usages, one shared fields object per resource and dimension), so the
 * parsed objects die young.
 *
 * Slices are cut at `},{`. A cut anywhere but between two elements of the
 * array (inside a string, or deeper in the structure) leaves a slice that is
 * not valid JSON; so when every slice parses and every event passes
 * checkEvent, the slices' events are exactly the body's. On anything else the
 * body goes the general way (JSON.parse as express.json does it, then
 * parseUsageEvents), which gives the same result or the same 400 as before.
 */
export interface UsageColumns {
  /** One entry per event; events of the same resource and dimension share the object (its `usage` is not read). */
  events: UsageFields[];
  ts: Float64Array;
  usage: Float64Array;
  label: string;
}

/** Parses the hook's body text (express.json's rules for the JSON itself) into columns; `sliceChars` is for tests. */
export function parseUsageEventsText(text: string, sliceChars = SLICE_CHARS): UsageColumns {
  const fast = readSliced(text, sliceChars);
  if (fast) return fast;
  const { events, ts, label } = parseUsageEvents(parseJsonLikeExpress(text));
  return { events, ts, usage: Float64Array.from(events, (e) => e.usage), label };
}

/** Characters per slice (about 1,000 events of the usual size). */
const SLICE_CHARS = 256 * 1024;
const WS = /^[\x20\x09\x0a\x0d]*$/;
const OPEN = /^[\x20\x09\x0a\x0d]*(\{[\x20\x09\x0a\x0d]*"events"[\x20\x09\x0a\x0d]*:[\x20\x09\x0a\x0d]*)?\[/;

/** The fast path: undefined when the body is not an array (or `{"events": [...]}`) of valid events. */
function readSliced(text: string, sliceChars: number): UsageColumns | undefined {
  const open = OPEN.exec(text.slice(0, 64));
  if (!open) return undefined;
  const wrapped = open[1] !== undefined;
  const from = open[0].length;
  const close = text.lastIndexOf("]");
  if (close < from) return undefined;
  const after = text.slice(close + 1);
  if (wrapped ? !/^[\x20\x09\x0a\x0d]*\}[\x20\x09\x0a\x0d]*$/.test(after) : !WS.test(after)) return undefined;
  const label = wrapped ? "body.events" : "body";

  const tuples = new Map<string, UsageFields[]>();
  let cap = 1024;
  let ts = new Float64Array(cap);
  let usage = new Float64Array(cap);
  const events: UsageFields[] = [];
  try {
    for (let start = from; start < close;) {
      const cut = close - start > sliceChars ? text.indexOf("},{", start + sliceChars) : -1;
      const stop = cut < 0 || cut >= close ? close : cut + 1;
      const slice: unknown = JSON.parse(`[${text.slice(start, stop)}]`);
      start = stop === close ? close : stop + 1;
      for (const value of slice as unknown[]) {
        const n = events.length;
        if (n === MAX_BATCH_EVENTS) return undefined;
        const t = checkEvent(value, label, n);
        const e = value as UsageFields;
        if (n === cap) {
          cap *= 2;
          ts = grow(ts, cap);
          usage = grow(usage, cap);
        }
        ts[n] = t;
        usage[n] = e.usage;
        events.push(tuple(tuples, e.workspace, e.resourceType, e.resourceName, e.resourceUuid, e.billingDimension));
      }
    }
  } catch {
    return undefined; // a bad slice or event: the general way names the fault
  }
  return { events, ts: ts.subarray(0, events.length), usage: usage.subarray(0, events.length), label };
}

function grow(a: Float64Array, cap: number): Float64Array<ArrayBuffer> {
  const b = new Float64Array(cap);
  b.set(a);
  return b;
}

/** The shared fields object of (workspace, resourceType, resourceName, resourceUuid, billingDimension). */
function tuple(
  tuples: Map<string, UsageFields[]>,
  workspace: string,
  type: string,
  resourceName: string,
  resourceUuid: string,
  billingDimension: string,
): UsageFields {
  const resourceType = type as UsageFields["resourceType"];
  let list = tuples.get(resourceUuid);
  if (!list) tuples.set(resourceUuid, (list = []));
  for (const e of list) {
    if (e.workspace === workspace && e.resourceType === resourceType && e.resourceName === resourceName && e.billingDimension === billingDimension) return e;
  }
  const e: UsageFields = { workspace, resourceType, resourceName, resourceUuid, billingDimension, usage: 0 };
  list.push(e);
  return e;
}

/**
 * express.json's parse (body-parser 2, strict): an empty body is `{}`; a body
 * not starting with `{` or `[` fails as JSON.parse fails at that character;
 * a failure carries `type: "entity.parse.failed"`, which the error middleware
 * renders as the same 400 `invalid JSON body: ...` as before.
 */
export function parseJsonLikeExpress(text: string): unknown {
  if (text.length === 0) return {};
  const first = /^[\x20\x09\x0a\x0d]*([^\x20\x09\x0a\x0d]|$)/.exec(text)?.[1] || undefined;
  try {
    if (first !== "{" && first !== "[") {
      // body-parser's createStrictSyntaxError: parse the text with everything from that character masked by "#".
      const index = first === undefined ? -1 : text.indexOf(first);
      const partial = index === -1 ? "" : text.substring(0, index) + "#".repeat(text.length - index);
      try {
        JSON.parse(partial);
      } catch (e) {
        throw Object.assign(new SyntaxError((e as Error).message.replace(/#+/g, (m) => text.substring(index, index + m.length))), {
          status: 400,
          type: "entity.parse.failed",
        });
      }
      throw Object.assign(new SyntaxError("strict violation"), { status: 400, type: "entity.parse.failed" });
    }
    return JSON.parse(text);
  } catch (e) {
    if ((e as { type?: string }).type === "entity.parse.failed") throw e;
    throw Object.assign(e as Error, { status: 400, type: "entity.parse.failed" });
  }
}
