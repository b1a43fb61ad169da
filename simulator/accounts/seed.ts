import { z } from "zod";
import { readFileSync } from "node:fs";
import { StartupError } from "../../src/startup.js";
import { randomToken } from "../../src/ids.js";
import { errors } from "../../src/errors.js";
import { toIso as iso } from "../../src/clock.js";
import { digest } from "../auth/credentials.js";
import { NAME_PATTERN } from "../resources/metadata.js";
import { redirectUriSchema } from "../auth/redirect-uri.js";
import type { CredentialStore } from "../auth/credentials.js";
import type { SimClock } from "../clock.js";
import type { Ids } from "../../src/ids.js";
import type { Db } from "../../src/sqlite.js";
import type { AccountStore } from "../store/accounts.js";

/** Body of POST /_sim/seed and of the --seed file. */
export const SeedSchema = z.strictObject({
  accounts: z.array(z.strictObject({ id: z.string().min(1), name: z.string().min(1).optional() })).default([]),
  workspaces: z.array(z.strictObject({ name: z.string().regex(NAME_PATTERN), accountId: z.string().min(1), displayName: z.string().optional() })).default([]),
  users: z
    .array(
      z.strictObject({
        email: z.email(),
        accountId: z.string().min(1),
        role: z.enum(["admin", "member"]).default("member"),
        workspaces: z.array(z.string()).default([]),
        apiKey: z.string().min(8).optional(),
      }),
    )
    .default([]),
  // OAuth clients of the authorization-code flow: a code is sent only to one of their exact redirect URIs.
  oauthClients: z
    .array(z.strictObject({ clientId: z.string().min(1), name: z.string().optional(), redirectUris: z.array(redirectUriSchema).min(1) }))
    .default([]),
});
export type Seed = z.infer<typeof SeedSchema>;

/** What seeding writes to: the account and credential tables (in one transaction), with ids and the clock. */
export interface SeedDeps {
  db: Db;
  accounts: AccountStore;
  credentials: CredentialStore;
  clock: SimClock;
  ids: Ids;
}

export function createWorkspace(
  deps: { accounts: AccountStore; clock: SimClock; ids: Ids },
  input: { name: string; accountId: string; displayName?: string; labels?: Record<string, string>; region?: string; createdBy?: string },
): Record<string, unknown> {
  const now = deps.clock.now();
  if (deps.accounts.workspace(input.name)) throw errors.conflict(`workspace "${input.name}" already exists`);
  if (!deps.accounts.account(input.accountId)) throw errors.badRequest(`accountId: account "${input.accountId}" does not exist`);
  const doc = {
    name: input.name,
    displayName: input.displayName ?? input.name,
    id: deps.ids(),
    accountId: input.accountId,
    region: input.region ?? "us-pdx-1",
    labels: input.labels ?? {},
    status: "ready",
    createdAt: iso(now),
    updatedAt: iso(now),
    createdBy: input.createdBy ?? "",
    updatedBy: input.createdBy ?? "",
  };
  deps.accounts.insertWorkspace({ name: input.name, accountId: input.accountId, createdMs: now, doc });
  return doc;
}

/** Creates (or extends) accounts, workspaces and users; each user's apiKey becomes a working Bearer credential. */
export function applySeed(deps: SeedDeps, seed: Seed): { accounts: number; workspaces: number; users: number; oauthClients: number } {
  const run = deps.db.transaction(() => {
    const now = deps.clock.now();
    for (const a of seed.accounts) deps.accounts.putAccount(a.id, a.name ?? a.id, now);
    for (const w of seed.workspaces) if (!deps.accounts.workspace(w.name)) createWorkspace(deps, w);
    for (const u of seed.users) {
      if (!deps.accounts.account(u.accountId)) throw errors.badRequest(`users.accountId: account "${u.accountId}" does not exist`);
      const email = u.email.toLowerCase();
      let user = deps.accounts.userByEmail(email);
      if (!user) {
        user = { sub: deps.ids(), email, account_id: u.accountId, role: u.role, created_at: iso(now) };
        deps.accounts.insertUser(user);
      }
      for (const ws of u.workspaces) {
        if (!deps.accounts.workspace(ws)) throw errors.badRequest(`users.workspaces: workspace "${ws}" does not exist`);
        deps.accounts.setMembership(user.sub, ws, u.role);
      }
      if (u.apiKey && !deps.credentials.apiKeyBySecret(u.apiKey)) {
        deps.credentials.insertApiKey({
          id: deps.ids(),
          key_hash: digest(u.apiKey),
          name: "seed",
          sub: user.sub,
          sub_type: "user",
          expires_in: null,
          expires_ms: null,
          created_at: iso(now),
          created_by: user.sub,
        });
      }
    }
    for (const c of seed.oauthClients)
      deps.credentials.putOAuthClient({
        client_id: c.clientId,
        name: c.name ?? c.clientId,
        redirect_uris: JSON.stringify(c.redirectUris),
        created_at: iso(now),
      });
  });
  run();
  return { accounts: seed.accounts.length, workspaces: seed.workspaces.length, users: seed.users.length, oauthClients: seed.oauthClients.length };
}

export const DEFAULT_ACCOUNT = "local";
export const DEFAULT_ADMIN_EMAIL = "admin@local.test";

/** The state every fresh simulator starts from: account `local`, the default workspace, an admin with the API key. */
export function bootstrap(deps: SeedDeps, workspace: string, apiKey: string): void {
  applySeed(deps, {
    accounts: [{ id: DEFAULT_ACCOUNT, name: "Local account" }],
    workspaces: [{ name: workspace, accountId: DEFAULT_ACCOUNT }],
    users: [{ email: DEFAULT_ADMIN_EMAIL, accountId: DEFAULT_ACCOUNT, role: "admin", workspaces: [workspace], apiKey }],
    oauthClients: [],
  });
}

export const generateApiKey = (): string => `sim_${randomToken(24)}`;

/**
 * The --seed file, read and checked before anything is opened: a missing file, bad JSON or the wrong shape
 * is one line naming the file and the first problem (exit 2), never a ZodError dump.
 */
export function readSeedFile(path: string): Seed {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new StartupError(`--seed ${path}: ${code === "ENOENT" ? "no such file" : (err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new StartupError(`--seed ${path} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = SeedSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = issue.path.length ? `${issue.path.join(".")}: ` : "";
    throw new StartupError(`--seed ${path}: ${at}${issue.message} (expected {accounts, workspaces, users} as POST /_sim/seed takes)`);
  }
  return parsed.data;
}
