import { afterAll, describe, expect, it } from "vitest";
import { api, startTestSim } from "../../helpers/simulator.js";

/**
 * List items are served from cached JSON texts (ResourceStore.renderedJson):
 * every list below is requested twice or more in a row, so a second answer
 * comes from the cache and must still show the change.
 */
const sim = startTestSim();
afterAll(() => sim.close());

interface Item {
  metadata: { name: string; displayName: string; labels: Record<string, string> };
  spec: { runtime?: { envs?: { name: string; value: string; secret?: boolean }[] } };
  status: string;
  events: { status: string }[];
}

async function listed(path: string, query = ""): Promise<Item[]> {
  const first = await sim.api.get(`${path}${query}`).expect(200);
  const again = await sim.api.get(`${path}${query}`).expect(200);
  expect(again.text).toBe(first.text);
  return first.body.data as Item[];
}

const named = (items: Item[], name: string) => items.find((i) => i.metadata.name === name);

describe("list item cache", () => {
  it("shows each status move of the clock, with its event", async () => {
    await sim.api.post("/v0/agents", { metadata: { name: "moving" } }).expect(200);
    expect(named(await listed("/v0/agents"), "moving")?.status).toBe("UPLOADING");
    sim.clock.advance(500);
    const building = named(await listed("/v0/agents"), "moving")!;
    expect(building.status).toBe("BUILDING");
    expect(building.events.map((e) => e.status)).toEqual(["UPLOADING", "BUILDING"]);
    sim.clock.advance(1000);
    expect(named(await listed("/v0/agents"), "moving")?.status).toBe("DEPLOYED");
  });

  it("shows an update at once, for every page size and the bare-array version", async () => {
    await sim.api.post("/v0/agents", { metadata: { name: "renamed", displayName: "Before" } }).expect(200);
    expect(named(await listed("/v0/agents"), "renamed")?.metadata.displayName).toBe("Before");
    await sim.api.put("/v0/agents/renamed", { metadata: { displayName: "After", labels: { v: "2" } } }).expect(200);
    const after = named(await listed("/v0/agents"), "renamed")!;
    expect(after.metadata).toMatchObject({ displayName: "After", labels: { v: "2" } });
    expect(named(await listed("/v0/agents", "?limit=1&sort=name:desc"), "renamed")?.metadata.displayName).toBe("After");
    const bare = await api(sim.app, undefined, undefined, "2026-04-16").get("/v0/agents").expect(200);
    expect(bare.body.find((i: Item) => i.metadata.name === "renamed").metadata.displayName).toBe("After");
  });

  it("forgets a deleted item; a new one of the same name is rendered afresh", async () => {
    await sim.api.post("/v0/volumes", { metadata: { name: "gone", labels: { gen: "1" } }, spec: { size: 1024 } }).expect(200);
    expect(named(await listed("/v0/volumes"), "gone")?.metadata.labels).toBeUndefined(); // LiteVolume items carry no labels
    expect((await listed("/v0/volumes")).map((v) => v.metadata.name)).toContain("gone");
    await sim.api.delete("/v0/volumes/gone").expect(200);
    expect((await listed("/v0/volumes")).map((v) => v.metadata.name)).not.toContain("gone");
    await sim.api.post("/v0/volumes", { metadata: { name: "gone" }, spec: { size: 4096 } }).expect(200);
    const again = named(await listed("/v0/volumes"), "gone") as unknown as { spec: { size: number } };
    expect(again.spec.size).toBe(4096);
  });

  it("keeps the masked and the shown views apart", async () => {
    const envs = [{ name: "TOKEN", value: "real-token", secret: true }, { name: "MODE", value: "fast" }];
    await sim.api.post("/v0/agents", { metadata: { name: "secretive" }, spec: { runtime: { envs } } }).expect(200);
    const values = async (query = "") => named(await listed("/v0/agents", query), "secretive")!.spec.runtime!.envs!.map((e) => e.value);
    expect(await values()).toEqual(["***", "fast"]);
    expect(await values("?show_secrets=true")).toEqual(["real-token", "fast"]);
    expect(await values()).toEqual(["***", "fast"]);
    // A changed secret shows in the shown view, still masked in the other.
    await sim.api.put("/v0/agents/secretive", { spec: { runtime: { envs: [{ name: "TOKEN", value: "new-token", secret: true }] } } }).expect(200);
    expect(named(await listed("/v0/agents", "?show_secrets=true"), "secretive")!.spec.runtime!.envs![0]!.value).toBe("new-token");
    expect(named(await listed("/v0/agents"), "secretive")!.spec.runtime!.envs![0]!.value).toBe("***");
  });

  it("answers the same bytes JSON.stringify gives for the page", async () => {
    const res = await sim.api.get("/v0/agents?limit=2").expect(200);
    expect(res.text).toBe(JSON.stringify(res.body));
    expect(res.body.meta).toMatchObject({ hasMore: true });
    expect(res.headers["content-length"]).toBe(String(Buffer.byteLength(res.text)));
  });
});
