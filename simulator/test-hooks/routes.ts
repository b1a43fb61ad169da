import express, { type RequestHandler, type Router } from "express";
import { z } from "zod";
import { errors } from "../../src/errors.js";
import { injectedFault } from "../http/faults.js";
import { parse } from "../../src/http.js";
import { applySeed, SeedSchema } from "../accounts/seed.js";
import { resetState, type ResetDeps } from "./reset.js";
import { toIso as iso } from "../../src/clock.js";
import { DEPLOYMENT_STATUSES, forceStatus, settle, stepOnce, type Deployable, type DeploymentStatus } from "../resources/lifecycle.js";
import { expireDueSandboxes, type ExpiryDeps } from "../sandboxes/expiry.js";
import type { TestHooksState } from "../http/test-hooks-state.js";
import type { SandboxIsolation } from "../sandboxes/isolation.js";
import type { SandboxStandby } from "../sandboxes/runtime.js";

/**
 * Control routes, mounted only with --test-hooks (never by default). They
 * take no credential: the flag itself is the opt-in.
 */
const ClockBody = z.union([
  z.strictObject({ advanceMs: z.number().int().min(0) }),
  z.strictObject({ freeze: z.boolean() }),
  z.strictObject({ set: z.iso.datetime({ offset: true }) }),
]);

const TransitionsBody = z.strictObject({ mode: z.enum(["timed", "immediate", "manual"]) });

const StepBody = z.strictObject({
  workspace: z.string().optional(),
  kind: z.string().min(1),
  name: z.string().min(1),
  parent: z.string().default(""),
  /** Set this status at once instead of applying the next planned move. */
  status: z.enum(DEPLOYMENT_STATUSES as [DeploymentStatus, ...DeploymentStatus[]]).optional(),
});

const FaultRule = z.strictObject({
  method: z.string().optional(),
  path: z.string().optional(),
  status: z.number().int().min(400).max(599),
  times: z.number().int().min(1).optional(),
});
const FaultsBody = z.strictObject({ rules: z.array(FaultRule) });

const StandbyBody = z.strictObject({ workspace: z.string().optional(), sandbox: z.string().min(1), state: z.enum(["STANDBY", "RUNNING"]) });

const DnsBody = z.strictObject({ txt: z.record(z.string(), z.string()).optional(), cname: z.string().optional() });

/**
 * The test hooks (/_sim): a reset and a seed write every table, and expiry, forced statuses and standby reach the
 * sandboxes' runtime; their type says so (the reset's, expiry's, and the runtime with its description).
 */
export type TestHooksDeps = ResetDeps & ExpiryDeps & { sandboxes: SandboxStandby; sandboxIsolation: SandboxIsolation };

export function testHooksRouter(deps: TestHooksDeps): Router {
  const router = express.Router();
  const ok = (body: unknown) => JSON.stringify(body);

  router.post("/reset", (_req, res) => {
    resetState(deps);
    res.send(ok({ reset: true, workspace: deps.config.workspace }));
  });

  router.post("/seed", (req, res) => {
    res.send(ok(applySeed(deps, parse(SeedSchema, req.body ?? {}, "body"))));
  });

  router.post("/clock", (req, res) => {
    const body = parse(ClockBody, req.body ?? {}, "body");
    if ("advanceMs" in body) deps.clock.advance(body.advanceMs);
    else if ("freeze" in body) deps.clock.freeze(body.freeze);
    else deps.clock.set(Date.parse(body.set));
    // Sandbox ttl / expires / expiration policies come due on the simulator clock: a move applies them at once.
    const expired = expireDueSandboxes(deps);
    res.send(ok({ now: iso(deps.clock.now()), frozen: deps.clock.frozen, expired }));
  });
  router.get("/clock", (_req, res) => {
    res.send(ok({ now: iso(deps.clock.now()), frozen: deps.clock.frozen }));
  });

  router.post("/transitions", (req, res) => {
    deps.testHooks.transitions = parse(TransitionsBody, req.body ?? {}, "body").mode;
    res.send(ok({ mode: deps.testHooks.transitions }));
  });
  router.get("/transitions", (_req, res) => {
    res.send(ok({ mode: deps.testHooks.transitions }));
  });

  router.post("/transitions/step", async (req, res) => {
    const body = parse(StepBody, req.body ?? {}, "body");
    const workspace = body.workspace ?? deps.config.workspace;
    const item = deps.resources.get<Deployable>(workspace, body.kind, body.name, body.parent);
    if (!item) throw errors.notFound(`${body.kind} "${body.name}" not found in workspace "${workspace}"`);
    const now = deps.clock.now();
    settle(item.doc, now);
    const moved = body.status ? (forceStatus(item.doc, body.status, now), true) : stepOnce(item.doc, now);
    item.status = item.doc.status ?? "";
    deps.resources.update(item); // usage follows forced and stepped moves (the root's metering listener)
    // A real sandbox's agent follows a forced status, so status and agent never contradict each other.
    if (body.status && body.kind === "sandbox" && body.parent === "") await deps.sandboxes.followForcedStatus(workspace, body.name, body.status);
    const after = deps.resources.get<Deployable>(workspace, body.kind, body.name, body.parent)?.doc ?? item.doc;
    res.send(ok({ moved, status: after.status, pending: (after.__pending ?? []).map((p) => p.status) }));
  });

  router.put("/faults", (req, res) => {
    const { rules } = parse(FaultsBody, req.body ?? {}, "body");
    deps.testHooks.faults.splice(0, deps.testHooks.faults.length, ...rules);
    res.send(ok({ rules: deps.testHooks.faults }));
  });
  router.get("/faults", (_req, res) => {
    res.send(ok({ rules: deps.testHooks.faults }));
  });
  router.delete("/faults", (_req, res) => {
    deps.testHooks.faults.length = 0;
    res.send(ok({ rules: [] }));
  });

  // "The first call after standby", reproducibly: the sandbox sleeps now (whatever keeps it awake) or wakes now.
  router.post("/standby", async (req, res) => {
    const body = parse(StandbyBody, req.body ?? {}, "body");
    const workspace = body.workspace ?? deps.config.workspace;
    const now = deps.sandboxes.standbyState(workspace, body.sandbox);
    if (!now) throw errors.notFound(`sandbox "${body.sandbox}" in workspace "${workspace}" has no running agent`);
    const set = await deps.sandboxes.setStandby(workspace, body.sandbox, body.state);
    if (set === "unsupported")
      throw errors.conflict(`sandboxes do not go to standby with the ${deps.sandboxIsolation.launcher} launcher: it cannot stop them in place`);
    if (!set) throw errors.conflict(`sandbox "${body.sandbox}" could not be put in standby (see the simulator's log)`);
    res.send(ok({ workspace, sandbox: body.sandbox, state: deps.sandboxes.standbyState(workspace, body.sandbox) }));
  });

  router.put("/dns/:domain", (req, res) => {
    const records = parse(DnsBody, req.body ?? {}, "body");
    deps.testHooks.dns.set(req.params.domain!.toLowerCase(), records);
    res.send(ok({ domain: req.params.domain, ...records }));
  });

  return router;
}

/** Fault injection for the routes Express serves (the operations front calls injectedFault itself). */
export function faultInjection(deps: { testHooks: TestHooksState }): RequestHandler {
  return (req, _res, next) => {
    const fault = injectedFault(deps.testHooks, req.method, req.path, req.headers.prefer);
    if (fault) throw fault;
    next();
  };
}
