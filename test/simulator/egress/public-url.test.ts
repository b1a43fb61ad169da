import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { sdkForSimulator } from "../../helpers/sdk.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";

/**
 * With --public-url naming a host (the URLs users get, and the sandbox's own
 * URLs, carry it), that name leads to the simulator from inside a sandbox too:
 * its /etc/hosts names it 127.0.0.1, where the egress gateway listens on the
 * public URL's port. The host here cannot resolve the name, so the test talks
 * to the simulator by its listen address, as a reverse proxy in front would.
 */
type Sdk = typeof import("@blaxel/core");
const KEY = "egress-public-url-key";
const NAME = "sim-public.test";

describe.skipIf(isolationUnavailable !== undefined)("the --public-url host inside a sandbox", () => {
  let sim: ServedSimulator;
  let sdk: Sdk;
  let port = 0;

  beforeAll(async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    sim = await serveSimulator({ port, publicUrl: `http://${NAME}:${port}`, imageSource: "host", apiKey: KEY, workspace: "pub", logLevel: "silent" });
    sdk = await sdkForSimulator(sim.env);
  }, 120_000);
  afterAll(async () => {
    await sim?.stop();
  });

  it("resolves to the gateway, and the API answers by the public URL from inside", async () => {
    const created = await sdk.SandboxInstance.create({ name: "inside" });
    const local = new URL(created.metadata.url!);
    expect(local.hostname).toBe(NAME);
    // The SDK outside talks to the sandbox by the listen address (this host cannot resolve the public name).
    const box = new sdk.SandboxInstance({ metadata: { name: "inside", url: `${sim.url}${local.pathname}` }, spec: {} } as never);
    const run = async (command: string) => (await box.process.exec({ command, waitForCompletion: true, timeout: 30 })).logs?.trim();
    expect(await run(`getent hosts ${NAME}`)).toMatch(/^127\.0\.0\.1\s+.*sim-public\.test/);
    const listed = await run(
      `curl -sS --noproxy '*' --max-time 10 -H 'Authorization: Bearer ${KEY}' -H 'X-Blaxel-Workspace: pub' http://${NAME}:${port}/v0/sandboxes`,
    );
    expect((JSON.parse(listed!) as { metadata: { name: string } }[]).map((s) => s.metadata.name)).toEqual(["inside"]);
  });
});
