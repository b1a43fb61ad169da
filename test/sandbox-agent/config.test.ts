import { describe, expect, it } from "vitest";
import { parseAgentConfig } from "../../sandbox-agent/config.js";
import { resolve } from "node:path";

describe("parseAgentConfig", () => {
  it("applies defaults", () => {
    const c = parseAgentConfig([], {});
    expect(c).toMatchObject({ host: "127.0.0.1", port: 8080, root: resolve(".sandbox/root"), dataDir: resolve(".sandbox/data"), logFormat: "auto", uploadExpiryMs: 86_400_000, maxOpenUploads: 100, maxPartSize: 5 * 2 ** 30 });
    expect(Object.isFrozen(c)).toBe(true);
  });
  it("reads env fallbacks, flags win", () => {
    const env = { PORT: "9000", SANDBOX_AGENT_HOST: "127.0.0.2", SANDBOX_AGENT_ROOT: "/srv", SANDBOX_AGENT_DATA_DIR: "/var/x", SANDBOX_AGENT_TOKEN: "t" };
    expect(parseAgentConfig([], env)).toMatchObject({ port: 9000, host: "127.0.0.2", root: "/srv", dataDir: "/var/x", token: "t" });
    expect(parseAgentConfig(["--port", "0"], env)).toMatchObject({ port: 0 });
  });
  it("parses durations and sizes", () => {
    expect(parseAgentConfig(["--upload-expiry", "90m", "--max-part-size", "64MiB"], {})).toMatchObject({ uploadExpiryMs: 5_400_000, maxPartSize: 64 * 2 ** 20 });
  });
  it("names the bad option", () => {
    expect(() => parseAgentConfig(["--upload-expiry", "10"], {})).toThrow(/--upload-expiry: invalid duration/);
    expect(() => parseAgentConfig(["--port", "x"], {})).toThrow(/--port/);
    expect(() => parseAgentConfig(["--bogus"], {})).toThrow(/bogus/);
  });
  it("refuses a non-loopback host without a token unless --no-auth", () => {
    expect(() => parseAgentConfig(["--host", "0.0.0.0"], {})).toThrow(/refusing to listen on 0.0.0.0 without a token/);
    expect(parseAgentConfig(["--host", "0.0.0.0", "--no-auth"], {})).toMatchObject({ host: "0.0.0.0", noAuth: true });
    expect(parseAgentConfig(["--host", "0.0.0.0", "--token", "t"], {})).toMatchObject({ token: "t" });
  });
});
