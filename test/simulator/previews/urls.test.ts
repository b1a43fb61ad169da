import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { cookieWithout, matchingToken, presentedToken } from "../../../simulator/previews/tokens.js";
import {
  labelCandidates,
  prefixedPreviewFromPath,
  previewFromPath,
  previewHostLabel,
  previewUrl,
  withoutTokenParam,
} from "../../../simulator/previews/urls.js";
import { isPortPath, targetFromRunPath } from "../../../simulator/proxy/index.js";

describe("preview addresses", () => {
  it("reads the path form, leaving the control plane's /v0 paths alone", () => {
    expect(previewFromPath("/ws/sandboxes/box/previews/site/a/b?x=1")).toEqual({
      workspace: "ws",
      sandbox: "box",
      preview: "site",
      rest: "/a/b?x=1",
      cookiePath: "/ws/sandboxes/box/previews/site",
    });
    expect(previewFromPath("/ws/sandboxes/box/previews/site")).toMatchObject({ rest: "/" });
    expect(previewFromPath("/ws/sandboxes/box/previews/site?q")).toMatchObject({ rest: "/?q" });
    expect(previewFromPath("/v0/sandboxes/box/previews/site")).toBeUndefined();
    expect(previewFromPath("/ws/sandboxes/box/filesystem/x")).toBeUndefined();
  });

  it("reads the prefixUrl path form", () => {
    expect(prefixedPreviewFromPath("/ws/previews/my-app/a/b?x=1")).toEqual({
      workspace: "ws",
      prefix: "my-app",
      rest: "/a/b?x=1",
      cookiePath: "/ws/previews/my-app",
    });
    expect(prefixedPreviewFromPath("/ws/previews/my-app")).toMatchObject({ rest: "/" });
    expect(prefixedPreviewFromPath("/ws/previews/my-app?q")).toMatchObject({ rest: "/?q" });
    expect(prefixedPreviewFromPath("/v0/previews/my-app")).toBeUndefined();
    expect(prefixedPreviewFromPath("/ws/previews/My_App")).toBeUndefined();
    expect(prefixedPreviewFromPath("/ws/sandboxes/box/previews/site")).toBeUndefined();
  });

  it("reads host labels and the workspaces they may end with (names contain '-')", () => {
    expect(previewHostLabel("Site-Box-WS.preview.localhost:8081")).toBe("site-box-ws");
    expect(previewHostLabel("127.0.0.1:8081")).toBeUndefined();
    expect(previewHostLabel("sbx-box-id.local.localhost")).toBeUndefined();
    const candidates = labelCandidates("site-my-box-team-a", ["team-a", "a", "other"]);
    expect(candidates.map((c) => c.workspace)).toEqual(["team-a", "a"]);
    expect(candidates[0]!.splits).toEqual([
      { preview: "site", sandbox: "my-box" },
      { preview: "site-my", sandbox: "box" },
    ]);
    expect(candidates[0]!.prefix).toBe("site-my-box");
  });

  it("writes spec.url in either form", () => {
    expect(previewUrl("http://127.0.0.1:8081", "path", "ws", "box", "site", undefined)).toBe("http://127.0.0.1:8081/ws/sandboxes/box/previews/site");
    expect(previewUrl("http://127.0.0.1:8081", "host", "ws", "box", "site", undefined)).toBe("http://site-box-ws.preview.localhost:8081");
    expect(previewUrl("http://127.0.0.1:8081", "host", "ws", "box", "site", "myapp")).toBe("http://myapp-ws.preview.localhost:8081");
    expect(previewUrl("http://127.0.0.1:8081", "path", "ws", "box", "site", "my-custom-prefix")).toBe("http://127.0.0.1:8081/ws/previews/my-custom-prefix");
    expect(previewUrl("https://sim.example.dev", "host", "ws", "box", "site", undefined)).toBe("https://site-box-ws.preview.sim.example.dev");
  });

  it("removes the preview token from the query and the cookie, nothing else", () => {
    expect(withoutTokenParam("/a?x=1&bl_preview_token=t&y=2")).toBe("/a?x=1&y=2");
    expect(withoutTokenParam("/a?bl_preview_token=t")).toBe("/a");
    expect(withoutTokenParam("/a?x=bl_preview_token")).toBe("/a?x=bl_preview_token");
    expect(cookieWithout("a=1; bl_preview_token=t; b=2", "bl_preview_token")).toBe("a=1; b=2");
    expect(cookieWithout("bl_preview_token=t", "bl_preview_token")).toBeUndefined();
  });
});

describe("preview tokens", () => {
  const req = (url: string, headers: Record<string, string> = {}) => ({ url, headers }) as unknown as IncomingMessage;
  it("are taken from the header, then the query parameter, then the cookie", () => {
    expect(presentedToken(req("/x?bl_preview_token=q", { "x-blaxel-preview-token": "h", cookie: "bl_preview_token=c" }))).toEqual({
      value: "h",
      from: "header",
    });
    expect(presentedToken(req("/x?bl_preview_token=q", { cookie: "bl_preview_token=c" }))).toEqual({ value: "q", from: "query" });
    expect(presentedToken(req("/x", { cookie: "a=1; bl_preview_token=c" }))).toEqual({ value: "c", from: "cookie" });
    expect(presentedToken(req("/x"))).toBeUndefined();
  });

  it("match only a live token of the preview", () => {
    const tokens = [
      { metadata: { name: "t1" }, spec: { token: "aaa", expiresAt: "2026-01-01T00:00:10Z" } },
      { metadata: { name: "t2" }, spec: { token: "bbb", expiresAt: "garbage" } },
    ];
    const at = Date.parse("2026-01-01T00:00:00Z");
    expect(matchingToken(tokens, "aaa", at)?.token.metadata.name).toBe("t1");
    expect(matchingToken(tokens, "aaa", at + 10_000)).toBeUndefined(); // expired at expiresAt exactly
    expect(matchingToken(tokens, "bbb", at)).toBeUndefined(); // no readable expiry: refused
    expect(matchingToken(tokens, "zzz", at)).toBeUndefined();
  });
});

describe("sandbox URL routes", () => {
  it("the run-URL form, never over the simulator's own paths or a preview", () => {
    expect(targetFromRunPath("/ws/sandboxes/box/port/3000/x?y=1")).toEqual({ workspace: "ws", sandbox: "box", path: "/port/3000/x?y=1" });
    expect(targetFromRunPath("/ws/sandboxes/box")).toEqual({ workspace: "ws", sandbox: "box", path: "/" });
    expect(targetFromRunPath("/v0/sandboxes/box")).toBeUndefined();
    expect(targetFromRunPath("/ws/sandboxes/box/previews/site")).toBeUndefined();
    expect(targetFromRunPath("/ws/agents/box")).toBeUndefined();
  });
  it("/port/{n} paths are app traffic", () => {
    expect(isPortPath("/port/3000")).toBe(true);
    expect(isPortPath("/port/3000/x")).toBe(true);
    expect(isPortPath("/port/3000?x")).toBe(true);
    expect(isPortPath("/port/abc")).toBe(false);
    expect(isPortPath("/process")).toBe(false);
  });
});
