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
    const envs = [
      { name: "TOKEN", value: "real-token", secret: true },
      { name: "MODE", value: "fast" },
    ];
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

/** Gets are served from the same cached texts (their own variants, with events), read-time fields added per read. */
async function got(path: string): Promise<{ text: string; body: Item & { expiresIn?: number } }> {
  const first = await sim.api.get(path).expect(200);
  const again = await sim.api.get(path).expect(200);
  expect(again.text).toBe(first.text);
  expect(first.text).toBe(JSON.stringify(first.body));
  return first;
}

describe("get cache", () => {
  it("shows each status move and update at once, with its events", async () => {
    await sim.api.post("/v0/agents", { metadata: { name: "got-moving" } }).expect(200);
    expect((await got("/v0/agents/got-moving")).body.status).toBe("UPLOADING");
    sim.clock.advance(500);
    const building = (await got("/v0/agents/got-moving")).body;
    expect(building.events.map((e) => e.status)).toEqual(["UPLOADING", "BUILDING"]);
    await sim.api.put("/v0/agents/got-moving", { metadata: { displayName: "Moved" } }).expect(200);
    expect((await got("/v0/agents/got-moving")).body).toMatchObject({ status: "DEPLOYING", metadata: { displayName: "Moved" } });
  });

  it("keeps the masked and the shown views apart, and apart from the list's items", async () => {
    await sim.api
      .post("/v0/sandboxes", { metadata: { name: "got-secret" }, spec: { runtime: { envs: [{ name: "TOKEN", value: "t0", secret: true }] } } })
      .expect(200);
    const value = async (query = "") => (await got(`/v0/sandboxes/got-secret${query}`)).body.spec.runtime!.envs![0]!.value;
    expect(await value()).toBe("***");
    expect(await value("?show_secrets=true")).toBe("t0");
    expect(await value()).toBe("***");
    // A sandbox's list item drops its events (the lite form); its get keeps them.
    expect(named(await listed("/v0/sandboxes"), "got-secret")).not.toHaveProperty("events");
    expect((await got("/v0/sandboxes/got-secret")).body.events.length).toBeGreaterThan(0);
  });

  it("adds expiresIn to the cached text on each read, counting down on the clock", async () => {
    await sim.api.post("/v0/sandboxes", { metadata: { name: "got-ttl" }, spec: { runtime: { ttl: "1h" } } }).expect(200);
    const first = await got("/v0/sandboxes/got-ttl");
    expect(first.body.expiresIn).toBe(3600);
    expect(first.text.endsWith(`,"expiresIn":3600}`)).toBe(true);
    sim.clock.advance(90_000);
    expect((await got("/v0/sandboxes/got-ttl")).body.expiresIn).toBe(3510);
    const listedTtl = named(await listed("/v0/sandboxes"), "got-ttl") as unknown as { expiresIn: number };
    expect(listedTtl.expiresIn).toBe(3510);
    // A preview token's `expired` replaces a field of its document: rendered whole, still the same bytes as JSON.stringify.
    await sim.api.post("/v0/sandboxes/got-ttl/previews", { metadata: { name: "p" }, spec: { port: 3000 } }).expect(200);
    await sim.api.post("/v0/sandboxes/got-ttl/previews/p/tokens", { spec: { expiresAt: new Date(sim.clock.now() + 60_000).toISOString() } }).expect(200);
    const tokens = await sim.api.get("/v0/sandboxes/got-ttl/previews/p/tokens").expect(200);
    expect(tokens.body[0].spec.expired).toBe(false);
    sim.clock.advance(120_000);
    expect((await sim.api.get("/v0/sandboxes/got-ttl/previews/p/tokens").expect(200)).body[0].spec.expired).toBe(true);
  });
});
