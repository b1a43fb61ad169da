import { describe, expect, it } from "vitest";
import { terminalCases } from "./terminal-cases.js";

terminalCases("process");

describe("the terminal's query credential (unit)", () => {
  it("is read on the terminal's two paths only, and only when no header carries one", async () => {
    const { terminalQueryToken } = await import("../../../simulator/agents/terminal-auth.js");
    expect(terminalQueryToken({}, "/terminal/ws?token=k&cols=80")).toBe("k");
    expect(terminalQueryToken({}, "/terminal?token=k")).toBe("k");
    expect(terminalQueryToken({}, "/process?token=k")).toBeUndefined();
    expect(terminalQueryToken({}, "/terminal/ws/x?token=k")).toBeUndefined();
    expect(terminalQueryToken({ authorization: "Bearer h" }, "/terminal/ws?token=k")).toBeUndefined();
  });

  it("is taken out of the path the agent gets", async () => {
    const { withoutQueryParameter } = await import("../../../simulator/sandbox-proxy.js");
    expect(withoutQueryParameter("/terminal/ws?token=k&cols=80&rows=24", "token")).toBe("/terminal/ws?cols=80&rows=24");
  });
});
