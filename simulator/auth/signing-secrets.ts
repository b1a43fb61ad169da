import { randomBytes } from "node:crypto";
import type { Db, Migration } from "../../src/sqlite.js";

/**
 * The keys that sign access tokens (JWT HS256) and list cursors live in the
 * simulator's database, so a simulator started again on the same --data file
 * still accepts the tokens and cursors it handed out, as the cloud does across
 * deploys. In memory they are new per process, like everything else.
 */
export const SIGNING_SECRET_MIGRATIONS: readonly Migration[] = [
  {
    id: "simulator/signing-secrets/001-init",
    sql: "CREATE TABLE signing_secrets (name TEXT PRIMARY KEY, secret BLOB NOT NULL)",
  },
];

export type SigningSecretName = "jwt" | "cursor";

/** The stored secret of that name, made (32 random bytes) on first use. */
export function signingSecret(db: Db, name: SigningSecretName): Buffer {
  db.prepare("INSERT OR IGNORE INTO signing_secrets (name, secret) VALUES (?, ?)").run(name, randomBytes(32));
  const row = db.prepare("SELECT secret FROM signing_secrets WHERE name = ?").get(name) as { secret: Buffer };
  return row.secret;
}

/** A text kept beside the signing secrets (e.g. the generated admin API key), made by `make` on first use. */
export function storedSecretText(db: Db, name: "admin-api-key", make: () => string): string {
  db.prepare("INSERT OR IGNORE INTO signing_secrets (name, secret) VALUES (?, ?)").run(name, Buffer.from(make()));
  const row = db.prepare("SELECT secret FROM signing_secrets WHERE name = ?").get(name) as { secret: Buffer };
  return row.secret.toString();
}
