import { describe, expect, it } from "vitest";
import { bearerToken, isLoopbackHost, secretsEqual } from "../../src/auth.js";

describe("bearerToken", () => {
  it.each([
    [{ authorization: "Bearer a" }, "a"],
    [{ "x-blaxel-authorization": "Bearer b" }, "b"],
    [{ "x-service-authorization": "bearer c" }, "c"],
    [{ authorization: "Basic xyz" }, undefined],
    [{}, undefined],
  ])("%j → %s", (headers, token) => expect(bearerToken(headers)).toBe(token));
});

describe("secretsEqual", () => {
  it("compares exactly", () => {
    expect(secretsEqual("abc", "abc")).toBe(true);
    expect(secretsEqual("abc", "abd")).toBe(false);
    expect(secretsEqual("abc", "abcd")).toBe(false);
  });
});

describe("isLoopbackHost", () => {
  it.each(["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])("%s is loopback", (h) => expect(isLoopbackHost(h)).toBe(true));
  it.each(["0.0.0.0", "10.0.0.1", "::", "example.com"])("%s is not", (h) => expect(isLoopbackHost(h)).toBe(false));
});
