import { rmSync, statSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessLauncher, type AgentHandle } from "../../../simulator/launcher/index.js";
import { specFor, tempBase } from "../launcher/helpers.js";
import { startProxy, type ProxyHarness } from "./harness.js";
import { rssGrowthDuring } from "../../helpers/memory.js";

const MiB = 1024 * 1024;
const SIZE_MIB = 200;
/** The proxy may hold socket buffers, never the body: growth stays far below the 200 MiB that crosses it. */
const MAX_RSS_GROWTH_MIB = 64;
const BOUNDARY = "----proxy-large-upload";

const base = tempBase("proxy-large-");
const spec = specFor(base, "big");
let harness: ProxyHarness;
let agent: AgentHandle;

beforeAll(async () => {
  harness = await startProxy();
  agent = await new ProcessLauncher().start(spec);
  harness.sandboxes.set("big", { url: agent.url, token: spec.token });
});
afterAll(async () => {
  await agent?.stop(1_000);
  await harness?.close();
  rmSync(base, { recursive: true, force: true });
});

async function* multipartBody(mib: number): AsyncGenerator<Buffer> {
  yield Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const chunk = Buffer.alloc(MiB, 7);
  for (let i = 0; i < mib; i++) yield chunk;
  yield Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
}

function upload(mib: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const req = request(
      `${harness.url}/sbx/ws/big/filesystem/big.bin`,
      {
        method: "PUT",
        headers: { authorization: "Bearer key-of-ws", "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode!));
      },
    );
    req.on("error", reject);
    pipeline(Readable.from(multipartBody(mib)), req).catch(reject);
  });
}

describe("a 200 MiB upload through the proxy", () => {
  it("streams with flat memory, both ways", async () => {
    // Warm up first (connection pools, lazily loaded modules), so the figure is what the body costs.
    expect(await upload(16)).toBe(200);
    const uploaded = await rssGrowthDuring(async () => {
      expect(await upload(SIZE_MIB)).toBe(200);
    });
    expect(statSync(join(spec.rootDir, "big.bin")).size).toBe(SIZE_MIB * MiB);
    expect(uploaded).toBeLessThan(MAX_RSS_GROWTH_MIB);

    let received = 0;
    const download = await rssGrowthDuring(async () => {
      await new Promise<void>((resolve, reject) => {
        request(
          `${harness.url}/sbx/ws/big/filesystem/big.bin`,
          { headers: { authorization: "Bearer key-of-ws", accept: "application/octet-stream" } },
          (res) => {
            expect(res.statusCode).toBe(200);
            res
              .on("data", (d: Buffer) => (received += d.length))
              .on("end", resolve)
              .on("error", reject);
          },
        )
          .on("error", reject)
          .end();
      });
    });
    expect(received).toBe(SIZE_MIB * MiB);
    expect(download).toBeLessThan(MAX_RSS_GROWTH_MIB);
  });
});
