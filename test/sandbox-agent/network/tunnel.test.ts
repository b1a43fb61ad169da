import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeStdBase64, parseTunnelConfig } from "../../../sandbox-agent/network/tunnel.js";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

/**
 * The tunnel routes as the reference's suite (tests/network/tunnel_test.go)
 * calls them: bad bodies get its 400 and 422 with "invalid tunnel config: ...",
 * a valid configuration the 501 saying the WireGuard tunnel is not emulated,
 * and DELETE the reference's 400 for no tunnel running.
 */
let agent: TestAgent;
beforeAll(async () => {
  agent = await startTestAgent();
});
afterAll(() => agent.stop());

const key = (offset: number) => Buffer.from(Array.from({ length: 32 }, (_, i) => i + offset)).toString("base64");
const valid = { local_ip: "10.99.0.1/32", peer_endpoint: "1.2.3.4:51820", peer_public_key: key(0), private_key: key(128) };
const b64 = (v: unknown) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64");
const put = (body?: unknown) => {
  const r = request(agent.url).put("/network/tunnel/config");
  return body === undefined ? r : r.send(body as object);
};

describe("PUT /network/tunnel/config", () => {
  it("400 for no body, no config, an empty or non-string config", async () => {
    expect((await put()).status).toBe(400);
    expect((await put({})).body).toEqual({ error: "config is required: a base64-encoded JSON tunnel configuration" });
    expect((await put({ config: "" })).status).toBe(400);
    expect((await put({ config: 42 })).body).toEqual({ error: "config must be a string" });
    const malformed = await request(agent.url).put("/network/tunnel/config").set("content-type", "application/json").send("{nope");
    expect(malformed.status).toBe(400);
  });

  it("422 invalid tunnel config for bad base64 or JSON", async () => {
    const bad64 = await put({ config: "not-valid-base64!!!" });
    expect(bad64.status).toBe(422);
    expect(bad64.body.error).toBe("invalid tunnel config: failed to decode base64 configuration: illegal base64 data at input byte 3");
    const badJson = await put({ config: b64("not json") });
    expect(badJson.status).toBe(422);
    expect(badJson.body.error).toMatch(/^invalid tunnel config: failed to parse JSON configuration: /);
    const wrongType = await put({ config: b64({ ...valid, mtu: "1400" }) });
    expect(wrongType.body.error).toBe(
      "invalid tunnel config: failed to parse JSON configuration: json: cannot unmarshal string into Go struct field WireGuardConfig.mtu of type int",
    );
  });

  it.each([
    ["missing local_ip", { ...valid, local_ip: undefined }, "local_ip is required"],
    ["missing peer_endpoint", { ...valid, peer_endpoint: undefined }, "peer_endpoint is required"],
    ["missing peer_public_key", { ...valid, peer_public_key: undefined }, "peer_public_key is required"],
    ["missing private_key", { ...valid, private_key: undefined }, "private_key is required"],
    ["local_ip not CIDR", { ...valid, local_ip: "10.0.0.1" }, "local_ip must be in CIDR notation (e.g., 10.0.0.1/32): invalid CIDR address: 10.0.0.1"],
    [
      "peer_endpoint missing port",
      { ...valid, peer_endpoint: "1.2.3.4" },
      "peer_endpoint must be in host:port format (e.g., 1.2.3.4:51820): address 1.2.3.4: missing port in address",
    ],
    [
      "invalid peer_public_key",
      { ...valid, peer_public_key: "not-a-valid-key" },
      "invalid peer_public_key: not valid base64: illegal base64 data at input byte 3",
    ],
    ["a private_key of 16 bytes", { ...valid, private_key: Buffer.alloc(16).toString("base64") }, "invalid private_key: expected 32 bytes, got 16"],
    ["MTU too low", { ...valid, mtu: 10 }, "mtu must be between 68 and 65535, got 10"],
    ["MTU too high", { ...valid, mtu: 99999 }, "mtu must be between 68 and 65535, got 99999"],
    ["invalid allowed_ips", { ...valid, allowed_ips: ["not-a-cidr"] }, 'invalid allowed_ip "not-a-cidr": invalid CIDR address: not-a-cidr'],
  ])("422 for %s, in the reference's words", async (_name, config, why) => {
    const res = await put({ config: b64(config) });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: `invalid tunnel config: invalid configuration: ${why}` });
  });

  it("a valid configuration (extra fields ignored, IPv6 endpoint, every option) answers 501 saying what is not emulated", async () => {
    for (const config of [
      valid,
      { ...valid, unknown_field: "ignored", another_unknown: 12345 },
      { ...valid, peer_endpoint: "[2001:db8::1]:51820" },
      { ...valid, mtu: 1400, listen_port: 51821, interface_name: "wg1", allowed_ips: ["0.0.0.0/0", "10.0.0.0/8"], persistent_keepalive: 0, route_all: false },
      { ...valid, LOCAL_IP: "10.0.0.2/32", local_ip: undefined },
    ]) {
      const res = await put({ config: b64(config) });
      expect(res.status, JSON.stringify(config)).toBe(501);
      expect(res.body.error).toMatch(/^PUT \/network\/tunnel\/config: the configuration is valid, but the platform's WireGuard tunnel is not emulated/);
    }
  });

  it("has no GET and no POST (write-only, as the reference)", async () => {
    expect((await request(agent.url).get("/network/tunnel/config")).status).not.toBe(200);
    expect(
      (
        await request(agent.url)
          .post("/network/tunnel/config")
          .send({ config: b64(valid) })
      ).status,
    ).not.toBe(200);
  });
});

describe("DELETE /network/tunnel", () => {
  it("400 no WireGuard client is running (none ever runs here), saying why", async () => {
    const res = await request(agent.url).delete("/network/tunnel");
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/^no WireGuard client is running \(the platform's WireGuard tunnel is not emulated/);
  });
});

describe("the reference's parsing rules", () => {
  it("base64 as Go's StdEncoding: padding required, the first bad byte named", () => {
    expect(decodeStdBase64("aGk=").toString()).toBe("hi");
    expect(() => decodeStdBase64("aGk")).toThrow("illegal base64 data at input byte 0");
    expect(() => decodeStdBase64("aG=k")).toThrow("illegal base64 data at input byte 2");
    expect(() => decodeStdBase64("a-Gk")).toThrow("illegal base64 data at input byte 1");
  });

  it("applies the reference's defaults before validating (mtu 0 is 1420, no allowed_ips is 0.0.0.0/0)", () => {
    expect(parseTunnelConfig(b64({ ...valid, mtu: 0 }))).toMatchObject({
      mtu: 1420,
      listen_port: 51820,
      interface_name: "wg0",
      allowed_ips: ["0.0.0.0/0"],
      persistent_keepalive: 25,
    });
    expect(() => parseTunnelConfig(b64("null"))).toThrow("invalid configuration: local_ip is required");
    expect(() => parseTunnelConfig(b64("[1]"))).toThrow("json: cannot unmarshal array into Go value of type networking.WireGuardConfig");
  });
});
