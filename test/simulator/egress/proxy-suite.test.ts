import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { createLogger } from "../../../src/logging.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { ECHO_SERVER, H1_CLIENT, H2_CLIENT } from "./proxy-clients.js";

/**
 * The SDK's egress proxy suite, as its tests exercise it: an httpbin-like echo server in one sandbox behind a
 * public host-form preview, reached over https by its URL from other sandboxes — one with a proxy configuration
 * (routing rules with secrets), through HTTPS_PROXY (TLS to the proxy, CONNECT, the proxy's interception, HTTP/1.1
 * or HTTP/2), one without (straight to the preview's host, no proxy variables). Real sandboxes, real Node clients.
 */
type Sdk = typeof import("@blaxel/core");
type Sandbox = InstanceType<Sdk["SandboxInstance"]>;
const KEY = "egress-suite-admin-key";
const TOKEN = "tok_live_abc123";
const OTHER = "other-value-999";

describe.skipIf(isolationUnavailable !== undefined)("the egress proxy as the SDK's proxy suite uses it", () => {
  let sim: ServedSimulator;
  let sdk: Sdk;
  let proxied: Sandbox;
  let plain: Sandbox;
  let fenced: Sandbox;
  let echoUrl: string;
  let echoHost: string;
  let logs = "";

  type Rule = { destinations: string[]; headers?: Record<string, string>; body?: Record<string, string>; secrets?: Record<string, string> };
  const routing = (host: string): Rule[] => [
    {
      destinations: [host],
      headers: { "X-Token": "Bearer {{SECRET:api-token}}", "X-Multi": "{{SECRET:part-a}}-{{SECRET:part-b}}", "X-Plain": "no-secret-here" },
      body: { secret_key: "{{SECRET:api-token}}", composite: "prefix-{{SECRET:part-a}}-suffix" },
      secrets: { "api-token": TOKEN, "part-a": "ALPHA", "part-b": "BETA" },
    },
    { destinations: ["*.example.com"], headers: { "X-Other-Secret": "{{SECRET:other-key}}" }, secrets: { "other-key": OTHER } },
  ];

  beforeAll(async () => {
    const destination = new Writable({ write: (chunk, _e, cb) => ((logs += String(chunk)), cb()) });
    sim = await serveSimulator(
      { port: 0, imageSource: "host", apiKey: KEY, workspace: "suite", previewUrls: "host", logLevel: "debug" },
      { logger: createLogger({ level: "debug", destination }) },
    );
    sdk = await sdkForSimulator(sim.env);
    const echo = await sdk.SandboxInstance.create({ name: "echo", ports: [{ target: 3000 }] });
    await echo.fs.write("/tmp/echo.js", ECHO_SERVER);
    await echo.process.exec({ command: "node /tmp/echo.js 3000", waitForPorts: [3000] });
    const preview = await echo.previews.create({ metadata: { name: "echo" }, spec: { port: 3000, public: true } });
    echoUrl = preview.spec.url!;
    echoHost = new URL(echoUrl).hostname;
    [proxied, plain, fenced] = await Promise.all([
      sdk.SandboxInstance.create({ name: "proxied", network: { proxy: { routing: routing(echoHost) } } }),
      sdk.SandboxInstance.create({ name: "plain" }),
      sdk.SandboxInstance.create({ name: "fenced", network: { allowedDomains: [echoHost], firewall: { rulesets: ["proxy"] } } as never }),
    ]);
    for (const sandbox of [proxied, plain, fenced]) {
      await sandbox.fs.write("/tmp/h1.js", H1_CLIENT);
      await sandbox.fs.write("/tmp/h2.js", H2_CLIENT);
    }
  }, 180_000);
  afterAll(async () => {
    await sim?.stop();
  });

  const run = async (sandbox: Sandbox, command: string) => {
    const r = await sandbox.process.exec({ command, waitForCompletion: true, timeout: 30 });
    return { code: r.exitCode, out: r.logs ?? "" };
  };
  /** The client's answer: the echo server's JSON (status, ALPN protocol, what it received). */
  const call = async (sandbox: Sandbox, client: "h1" | "h2", method: string, path: string, headers: object = {}, body?: string) => {
    const r = await run(sandbox, `node /tmp/${client}.js ${method} ${echoUrl}${path} '${JSON.stringify(headers)}'${body ? ` '${body}'` : ""}`);
    expect(r.code, r.out).toBe(0);
    return JSON.parse(r.out) as { status: number; alpn: string; echo: { headers: Record<string, string>; json: Record<string, unknown>; path: string } };
  };

  it("the create answer echoes the routing secrets as sent; GET and list leave them out; logs never show them", async () => {
    expect(proxied.spec.network?.proxy?.routing?.[0]?.secrets).toEqual({ "api-token": TOKEN, "part-a": "ALPHA", "part-b": "BETA" });
    expect(proxied.spec.network?.proxy?.routing?.[1]?.secrets).toEqual({ "other-key": OTHER });
    const got = await sdk.SandboxInstance.get("proxied");
    expect(got.spec.network?.proxy?.routing).toHaveLength(2);
    expect(got.spec.network?.proxy?.routing?.[0]?.headers?.["X-Token"]).toBe("Bearer {{SECRET:api-token}}");
    expect(got.spec.network?.proxy?.routing?.[0]?.secrets).toBeUndefined();
    const listed = await fetch(`${sim.env.BL_API_URL}/sandboxes`, { headers: { authorization: `Bearer ${KEY}`, "x-blaxel-workspace": "suite" } });
    const text = await listed.text();
    expect(text).not.toContain(TOKEN);
    const item = (JSON.parse(text) as { metadata: { name: string }; spec: { network?: { proxy?: { routing?: object[] } } } }[]).find(
      (s) => s.metadata.name === "proxied",
    );
    expect(item?.spec.network?.proxy?.routing?.[0]).not.toHaveProperty("secrets");
    expect((await sdk.SandboxInstance.get("plain")).spec.network?.proxy).toBeUndefined();
    expect(logs).not.toContain(TOKEN);
  });

  it("only the sandbox with a proxy configuration has the proxy's variables, an https:// proxy and a bundle trusting its CA", async () => {
    const show = 'for v in HTTP_PROXY HTTPS_PROXY NODE_EXTRA_CA_CERTS SSL_CERT_FILE; do echo "$v=$(printenv $v)"; done';
    const withProxy = (await run(proxied, show)).out;
    expect(withProxy).toMatch(/^HTTPS_PROXY=https:\/\/\S+$/m);
    expect(withProxy).toMatch(/^HTTP_PROXY=https:\/\/\S+$/m);
    expect(withProxy).toMatch(/^NODE_EXTRA_CA_CERTS=\/\S+$/m);
    expect(withProxy).toMatch(/^SSL_CERT_FILE=\/\S+$/m);
    const without = (await run(plain, show)).out;
    for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "NODE_EXTRA_CA_CERTS"]) expect(without).toMatch(new RegExp(`^${name}=$`, "m"));
    // curl trusts the proxy's own certificate (TLS to the proxy) and the intercepted host's through the bundle the environment names.
    const curl = await run(proxied, `env NO_PROXY= no_proxy= curl -sS --max-time 10 ${echoUrl.replace("http:", "https:")}/headers`);
    expect(JSON.parse(curl.out).headers["x-token"], curl.out).toBe(`Bearer ${TOKEN}`);
    // Without the proxy, https straight to the preview's host works too (the simulator answers TLS on its port).
    const straight = await run(plain, `curl -sS --max-time 10 ${echoUrl.replace("http:", "https:")}/headers`);
    expect(JSON.parse(straight.out).path, straight.out).toBe("/headers");
  });

  it("through the proxy: rule headers and body fields with their secrets; without it: the same server, nothing injected", async () => {
    const viaProxy = await call(proxied, "h1", "GET", "/headers");
    expect(viaProxy.echo.headers["x-token"]).toBe(`Bearer ${TOKEN}`);
    expect(viaProxy.echo.headers["x-multi"]).toBe("ALPHA-BETA");
    expect(viaProxy.echo.headers["x-plain"]).toBe("no-secret-here");
    expect(viaProxy.echo.headers["x-other-secret"]).toBeUndefined();
    expect(JSON.stringify(viaProxy)).not.toContain("{{SECRET:");
    const posted = await call(proxied, "h1", "POST", "/post", {}, '{"user_field":"untouched"}');
    expect(posted.echo.json).toEqual({ user_field: "untouched", secret_key: TOKEN, composite: "prefix-ALPHA-suffix" });
    const direct = await call(plain, "h1", "POST", "/post", {}, '{"user_field":"untouched"}');
    expect(direct.echo.path).toBe("/post");
    expect(direct.echo.json).toEqual({ user_field: "untouched" });
    expect(direct.echo.headers["x-token"]).toBeUndefined();
  });

  it("{{SECRET:name}} in the program's own headers and JSON body is resolved for this destination's secrets only", async () => {
    const sent = { "X-User-Token": "{{SECRET:api-token}}", "X-User-Combo": "pre-{{SECRET:part-a}}-post", "X-Wrong-Route": "{{SECRET:other-key}}" };
    const got = await call(proxied, "h1", "GET", "/headers", sent);
    expect(got.echo.headers["x-user-token"]).toBe(TOKEN);
    expect(got.echo.headers["x-user-combo"]).toBe("pre-ALPHA-post");
    expect(got.echo.headers["x-wrong-route"]).toBe("{{SECRET:other-key}}");
    const body = await call(
      proxied,
      "h1",
      "POST",
      "/post",
      {},
      '{"api_key":"{{SECRET:api-token}}","nested":{"mixed":"hello-{{SECRET:part-b}}-world"},"other":"{{SECRET:other-key}}"}',
    );
    expect(body.echo.json).toMatchObject({ api_key: TOKEN, nested: { mixed: "hello-BETA-world" }, other: "{{SECRET:other-key}}" });
    // Without a proxy configuration nothing is resolved: the template goes as written.
    const plainSent = await call(plain, "h1", "GET", "/headers", { "X-User-Token": "{{SECRET:api-token}}" });
    expect(plainSent.echo.headers["x-user-token"]).toBe("{{SECRET:api-token}}");
  });

  it("a client offering h2 through the proxy gets HTTP/2, with injection and its own headers kept", async () => {
    const get = await call(proxied, "h2", "GET", "/headers", { "X-User-Custom": "from-h2-client" });
    expect(get.alpn).toBe("h2");
    expect(get.status).toBe(200);
    expect(get.echo.headers["x-token"]).toBe(`Bearer ${TOKEN}`);
    expect(get.echo.headers["x-user-custom"]).toBe("from-h2-client");
    const post = await call(proxied, "h2", "POST", "/post", { "X-Api": "{{SECRET:api-token}}" }, '{"user_data":"from-h2"}');
    expect(post.alpn).toBe("h2");
    expect(post.echo.json).toEqual({ user_data: "from-h2", secret_key: TOKEN, composite: "prefix-ALPHA-suffix" });
    expect(post.echo.headers["x-api"]).toBe(TOKEN);
  });

  it("refusals: a firewall allowing only the proxy cuts https straight to a host; a forbidden host is refused either way", async () => {
    const viaProxy = await call(fenced, "h1", "GET", "/get");
    expect(viaProxy.echo.path).toBe("/get");
    const straight = await run(fenced, `env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy node /tmp/h1.js GET ${echoUrl}/get`);
    expect(straight.code).not.toBe(0);
    expect(straight.out).not.toContain('"path"');
    await sdk.SandboxInstance.updateNetwork("fenced", { network: { forbiddenDomains: [echoHost] } } as never);
    const blocked = await run(fenced, `node /tmp/h1.js GET ${echoUrl}/get`);
    expect(blocked.code).not.toBe(0);
    expect(blocked.out).toContain("CONNECT 403");
    const blockedStraight = await run(fenced, `env -u HTTPS_PROXY -u https_proxy node /tmp/h1.js GET ${echoUrl}/get`);
    expect(blockedStraight.code).not.toBe(0);
    expect(blockedStraight.out).not.toContain('"path"');
    expect(logs).toContain("egress blocked by the sandbox's network policy");
  });
});
