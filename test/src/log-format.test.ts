import { describe, expect, it } from "vitest";
import { prettyLine, usePretty } from "../../src/log-format.js";

describe("readable log lines (a terminal, or --log-format pretty)", () => {
  it("level, time, program, message, then the fields", () => {
    const line = JSON.stringify({
      level: 30,
      time: "2026-11-23T18:03:04.120Z",
      pid: 7,
      name: "sandbox-sim",
      msg: "sandbox agent",
      sandbox: "demo",
      pid2: 12,
      endpoint: "unix:/run/x y",
    });
    expect(prettyLine(line, false)).toBe('18:03:04.120 INFO  sandbox-sim: sandbox agent sandbox=demo pid2=12 endpoint="unix:/run/x y"');
  });

  it("the front's request lines compact", () => {
    const line = JSON.stringify({
      level: 30,
      time: "2026-11-23T18:03:04.120Z",
      name: "sandbox-sim",
      msg: "request",
      method: "GET",
      url: "/v0/sandboxes",
      status: 200,
      ms: 1.2,
    });
    expect(prettyLine(line, false)).toBe("18:03:04.120 INFO  sandbox-sim: GET /v0/sandboxes → 200 (1.2 ms)");
  });

  it("errors show their message; what is not JSON passes unchanged", () => {
    const line = JSON.stringify({
      level: 50,
      time: "2026-11-23T18:03:04.120Z",
      msg: "shutdown failed",
      err: { type: "Error", message: "boom", stack: "Error: boom\n at x" },
    });
    expect(prettyLine(line, false)).toBe('18:03:04.120 ERROR shutdown failed err="boom"');
    expect(prettyLine("plain text", false)).toBe("plain text");
  });

  it("auto means pretty only on a terminal", () => {
    expect(usePretty("auto", { isTTY: true })).toBe(true);
    expect(usePretty("auto", { isTTY: false })).toBe(false);
    expect(usePretty("json", { isTTY: true })).toBe(false);
    expect(usePretty("pretty", {})).toBe(true);
  });
});
