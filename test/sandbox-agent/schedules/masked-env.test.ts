import request from "supertest";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";

/** A read-modify-write sends env values back masked; "***" must keep the stored value. */
let agent: TestAgent;
beforeAll(async () => {
  agent = await startTestAgent({ token: "masked-env-token" });
});
afterAll(() => agent.stop());

const auth = { authorization: "Bearer masked-env-token" };

it("PUT with an env value of *** keeps the stored value; other values replace it", async () => {
  const created = await request(agent.url)
    .post("/schedules")
    .set(auth)
    .send({ id: "rmw", type: "cron", value: "0 3 * * *", input: { command: "true", env: { KEY: "s3cret", OLD: "o" } } })
    .expect(200);
  expect(created.body.input.env).toEqual({ KEY: "***", OLD: "***" });
  await request(agent.url)
    .put("/schedules/rmw")
    .set(auth)
    .send({ type: "cron", value: "0 4 * * *", input: { command: "true", env: { ...created.body.input.env, OLD: "new", GHOST: "***" } } })
    .expect(200);
  const shown = await request(agent.url).get("/schedules/rmw?show_secrets=true").set(auth).expect(200);
  // a "***" for a key that had no stored value is taken literally (nothing to keep)
  expect(shown.body.input.env).toEqual({ KEY: "s3cret", OLD: "new", GHOST: "***" });
});
