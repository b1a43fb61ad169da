import { EventEmitter } from "node:events";
import type { Request, Response } from "express";
import { describe, expect, it } from "vitest";
import type { ApiError } from "../../../src/errors.js";
import { unauthenticatedBodyBudget } from "../../../simulator/http/body-budget.js";

/** Bodies read before authentication share one small budget. */
describe("unauthenticated body budget", () => {
  const budget = unauthenticatedBodyBudget({ perRequest: 100, total: 250 });
  const call = (headers: Record<string, string>) => {
    const res = new EventEmitter() as unknown as Response;
    let error: ApiError | undefined;
    budget({ headers } as Request, res, (err?: unknown) => (error = err as ApiError | undefined));
    return { res, error };
  };

  it("refuses a body declared over the per-request limit (413), reserves the rest until the reply closes (503 past the total)", () => {
    expect(call({ "content-length": "101" }).error?.status).toBe(413);
    expect(call({}).error).toBeUndefined();
    const a = call({ "content-length": "100" });
    const b = call({ "transfer-encoding": "chunked" }); // reserves the per-request limit
    expect(a.error ?? b.error).toBeUndefined();
    const refused = call({ "content-length": "60" }).error;
    expect(refused?.status).toBe(503);
    expect(refused?.headers).toMatchObject({ Connection: "close", "Retry-After": "1" });
    a.res.emit("close");
    expect(call({ "content-length": "60" }).error).toBeUndefined();
  });
});
