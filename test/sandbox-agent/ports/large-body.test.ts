import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { rssGrowthDuring, writeMiB } from "../../helpers/memory.js";
import { startAppServer, type AppServer, type Echo } from "../../helpers/websocket.js";

/**
 * /port/{n} streams: 200 MiB up and 200 MiB down through the agent's port
 * route while this process's RSS (client, agent and app all run here) grows
 * far less than the body. The agent may hold socket buffers, never the body.
 */
const MiB = 1024 * 1024;
const SIZE_MIB = 200;
const MAX_RSS_GROWTH_MIB = 64;
const TOKEN = "large-body-token";
let agent: TestAgent;
let app: AppServer;

beforeAll(async () => {
  agent = await startTestAgent({ token: TOKEN });
  app = await startAppServer();
});
afterAll(async () => {
  await app?.close();
  await agent?.stop();
});

function upload(mib: number): Promise<Echo> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${agent.url}/port/${app.port}/upload`,
      { method: "PUT", headers: { authorization: `Bearer ${TOKEN}`, "content-length": mib * MiB } },
      (res) => {
        let text = "";
        res.on("data", (d) => (text += d)).on("end", () => resolve(JSON.parse(text) as Echo));
      },
    );
    req.on("error", reject);
    writeMiB(req, mib);
  });
}

function download(mib: number): Promise<number> {
  return new Promise((resolve, reject) => {
    request(`${agent.url}/port/${app.port}/big?mib=${mib}`, { headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
      let bytes = 0;
      res.on("data", (d: Buffer) => (bytes += d.length)).on("end", () => resolve(bytes));
    })
      .on("error", reject)
      .end();
  });
}

describe("large bodies through /port/{n}", () => {
  it(`streams ${SIZE_MIB} MiB each way with flat memory`, async () => {
    expect((await upload(16)).bytes).toBe(16 * MiB); // warm-up: the figure is what the body costs
    let echo: Echo | undefined;
    const up = await rssGrowthDuring(async () => {
      echo = await upload(SIZE_MIB);
    });
    expect(echo!.bytes).toBe(SIZE_MIB * MiB);
    expect(up).toBeLessThan(MAX_RSS_GROWTH_MIB);
    let received = 0;
    const down = await rssGrowthDuring(async () => {
      received = await download(SIZE_MIB);
    });
    expect(received).toBe(SIZE_MIB * MiB);
    expect(down).toBeLessThan(MAX_RSS_GROWTH_MIB);
  });
});
