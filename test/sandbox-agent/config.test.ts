import { describe, expect, it } from "vitest";
import { parseAgentConfig } from "../../sandbox-agent/config.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

describe("parseAgentConfig", () => {
  it("reads the token from --token-file or SANDBOX_AGENT_TOKEN_FILE (a container secret); a missing or empty file is one clear error", () => {
    const dir = mkdtempSync(join(tmpdir(), "token-file-"));
    try {
      writeFileSync(join(dir, "token"), "s3cret-from-file\n");
      writeFileSync(join(dir, "empty"), "\n");
      expect(parseAgentConfig(["--token-file", join(dir, "token")], {})).toMatchObject({ token: "s3cret-from-file" });
      expect(parseAgentConfig([], { SANDBOX_AGENT_TOKEN_FILE: join(dir, "token") })).toMatchObject({ token: "s3cret-from-file" });
      expect(() => parseAgentConfig(["--token-file", join(dir, "nope")], {})).toThrow(/--token-file .*nope: no such file/);
      expect(() => parseAgentConfig(["--token-file", join(dir, "empty")], {})).toThrow(/token is empty/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("applies defaults", () => {
    const c = parseAgentConfig([], {});
    expect(c).toMatchObject({
      host: "127.0.0.1",
      port: 8080,
      root: resolve(".sandbox/root"),
      dataDir: resolve(".sandbox/data"),
      logFormat: "auto",
      uploadExpiryMs: 86_400_000,
      maxOpenUploads: 100,
      maxPartSize: 5 * 2 ** 30,
    });
    expect(Object.isFrozen(c)).toBe(true);
  });
  it("reads env fallbacks, flags win", () => {
    const env = { PORT: "9000", SANDBOX_AGENT_HOST: "127.0.0.2", SANDBOX_AGENT_ROOT: "/srv", SANDBOX_AGENT_DATA_DIR: "/var/x", SANDBOX_AGENT_TOKEN: "t" };
    expect(parseAgentConfig([], env)).toMatchObject({ port: 9000, host: "127.0.0.2", root: "/srv", dataDir: "/var/x", token: "t" });
    expect(parseAgentConfig(["--port", "0"], env)).toMatchObject({ port: 0 });
    expect(parseAgentConfig([], {})).toMatchObject({ metadataPath: "/bl/metadata" });
    expect(parseAgentConfig([], { BL_METADATA_PATH: "/run/meta.json" })).toMatchObject({ metadataPath: "/run/meta.json" });
    expect(parseAgentConfig(["--metadata-path", "/x/m"], { BL_METADATA_PATH: "/run/meta.json" })).toMatchObject({ metadataPath: "/x/m" });
  });
  it("reads how to run mount(8) and umount(8): an argv prefix, JSON or words; none means PATH's", () => {
    expect(parseAgentConfig([], {})).not.toHaveProperty("mountProgram", expect.anything());
    const c = parseAgentConfig(["--mount-program", '["/kit/ld.so","--library-path","/kit/lib","/kit/bin/mount"]', "--umount-program", "/kit/bin/umount"], {});
    expect(c).toMatchObject({ mountProgram: ["/kit/ld.so", "--library-path", "/kit/lib", "/kit/bin/mount"], umountProgram: ["/kit/bin/umount"] });
    expect(() => parseAgentConfig(["--mount-program", "[1"], {})).toThrow(/--mount-program/);
  });
  it("parses durations and sizes", () => {
    expect(parseAgentConfig(["--upload-expiry", "90m", "--max-part-size", "64MiB"], {})).toMatchObject({
      uploadExpiryMs: 5_400_000,
      maxPartSize: 64 * 2 ** 20,
    });
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

describe("--egress-relay", () => {
  it("takes <port>=<address>:<port>, and names the flag when malformed", () => {
    const config = parseAgentConfig(["--root", "/tmp", "--data-dir", "/tmp/d", "--no-auth", "--egress-relay", "8081=172.19.0.1:40000"], {});
    expect(config !== "help" && config.egressRelay).toEqual({ port: 8081, host: "172.19.0.1", targetPort: 40000 });
    expect(() => parseAgentConfig(["--root", "/tmp", "--data-dir", "/tmp/d", "--no-auth", "--egress-relay", "8081"], {})).toThrow(/--egress-relay/);
    expect(() => parseAgentConfig(["--root", "/tmp", "--data-dir", "/tmp/d", "--no-auth", "--egress-relay", "0=1.2.3.4:5"], {})).toThrow(/--egress-relay/);
  });
});

describe("--egress-tunnel", () => {
  it("takes the port inside the sandbox, and names the flag when it is not one", () => {
    const config = parseAgentConfig(["--root", "/tmp", "--data-dir", "/tmp/d", "--no-auth", "--egress-tunnel", "45123"], {});
    expect(config !== "help" && config.egressTunnel).toBe(45123);
    expect(() => parseAgentConfig(["--root", "/tmp", "--data-dir", "/tmp/d", "--no-auth", "--egress-tunnel", "70000"], {})).toThrow(/--egress-tunnel/);
  });
});
