import { describe, expect, it } from "vitest";
import { targetFromHost, targetFromPath } from "../../../simulator/proxy/index.js";

describe("sandbox routes", () => {
  it("reads workspace, sandbox and the agent path from /sbx/ URLs", () => {
    expect(targetFromPath("/sbx/ws/box/filesystem/a%20b?x=1")).toEqual({ workspace: "ws", sandbox: "box", path: "/filesystem/a%20b?x=1" });
    expect(targetFromPath("/sbx/ws/box")).toEqual({ workspace: "ws", sandbox: "box", path: "/" });
    expect(targetFromPath("/sbx/ws/box?q=1")).toEqual({ workspace: "ws", sandbox: "box", path: "/?q=1" });
    expect(targetFromPath("/sbx/ws")).toBeUndefined();
    expect(targetFromPath("/v0/sandboxes")).toBeUndefined();
    expect(targetFromPath("/sbx/%E0%A4%A/box/")).toBeUndefined();
  });

  it("splits sbx-{sandbox}-{workspaceId} where both contain dashes", () => {
    const ids: Record<string, string> = { "ws-id-7": "team" };
    const lookup = (id: string) => ids[id];
    expect(targetFromHost("sbx-my-box-ws-id-7.local.localhost:8081", "/process?a=1", lookup)).toEqual({
      workspace: "team",
      sandbox: "my-box",
      path: "/process?a=1",
    });
    expect(targetFromHost("sbx-my-box-ws-id-7.us-pdx-1.localhost", "/", lookup)).toMatchObject({ sandbox: "my-box" });
    expect(targetFromHost("sbx-my-box-unknown.local.localhost", "/", lookup)).toBeUndefined();
    expect(targetFromHost("127.0.0.1:8081", "/", lookup)).toBeUndefined();
    expect(targetFromHost("sbx-a-ws-id-7.example.com", "/", lookup)).toBeUndefined();
    expect(targetFromHost(undefined, "/", lookup)).toBeUndefined();
  });
});
