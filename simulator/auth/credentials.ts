import { createHash } from "node:crypto";
import type { Statement } from "better-sqlite3";
import type { Db } from "../../src/sqlite.js";

export type SubjectType = "user" | "service_account";

export interface ServiceAccountRow {
  client_id: string;
  workspace: string;
  name: string;
  description: string;
  secret_hash: string;
  created_at: string;
  updated_at: string;
}

export interface ApiKeyRow {
  id: string;
  key_hash: string;
  name: string;
  sub: string;
  sub_type: SubjectType;
  expires_in: string | null;
  expires_ms: number | null;
  created_at: string;
  created_by: string;
}

/** A registered OAuth client of the authorization-code flow; `redirect_uris` is a JSON array of exact URIs. */
export interface OAuthClientRow {
  client_id: string;
  name: string;
  redirect_uris: string;
  created_at: string;
}

export interface GrantRow {
  token_hash: string;
  kind: "code" | "refresh";
  sub: string;
  sub_type: SubjectType;
  client_id: string;
  redirect_uri: string;
  scope: string;
  expires_ms: number;
}

/** Secrets are stored as SHA-256 digests and looked up by digest. */
export const digest = (secret: string): string => createHash("sha256").update(secret).digest("hex");

/** Service accounts, API keys and OAuth grants (authorization codes, refresh tokens). */
export class CredentialStore {
  readonly #s: Record<string, Statement>;
  readonly #deleteSubject: (clientId: string) => void;
  /** Called after a credential is revoked (cached principals are dropped). */
  readonly #changed: () => void;

  constructor(db: Db, changed: () => void = () => {}) {
    this.#changed = changed;
    this.#s = {
      insertSa: db.prepare(
        "INSERT INTO service_accounts (client_id, workspace, name, description, secret_hash, created_at, updated_at) VALUES (@client_id, @workspace, @name, @description, @secret_hash, @created_at, @updated_at)",
      ),
      sa: db.prepare("SELECT * FROM service_accounts WHERE client_id = ?"),
      sasOf: db.prepare("SELECT * FROM service_accounts WHERE workspace = ? ORDER BY created_at, client_id"),
      updateSa: db.prepare("UPDATE service_accounts SET name = @name, description = @description, updated_at = @updated_at WHERE client_id = @client_id"),
      deleteSa: db.prepare("DELETE FROM service_accounts WHERE client_id = ?"),
      insertKey: db.prepare(
        "INSERT INTO api_keys (id, key_hash, name, sub, sub_type, expires_in, expires_ms, created_at, created_by) VALUES (@id, @key_hash, @name, @sub, @sub_type, @expires_in, @expires_ms, @created_at, @created_by)",
      ),
      keyByHash: db.prepare("SELECT * FROM api_keys WHERE key_hash = ?"),
      keysOf: db.prepare("SELECT * FROM api_keys WHERE sub = ? ORDER BY created_at, id"),
      deleteKey: db.prepare("DELETE FROM api_keys WHERE sub = ? AND id = ?"),
      deleteKeysOf: db.prepare("DELETE FROM api_keys WHERE sub = ?"),
      insertGrant: db.prepare(
        "INSERT INTO oauth_grants (token_hash, kind, sub, sub_type, client_id, redirect_uri, scope, expires_ms) VALUES (@token_hash, @kind, @sub, @sub_type, @client_id, @redirect_uri, @scope, @expires_ms)",
      ),
      grant: db.prepare("SELECT * FROM oauth_grants WHERE token_hash = ? AND kind = ?"),
      deleteGrant: db.prepare("DELETE FROM oauth_grants WHERE token_hash = ?"),
      deleteGrantsOf: db.prepare("DELETE FROM oauth_grants WHERE sub = ?"),
      putClient: db.prepare(
        "INSERT INTO oauth_clients (client_id, name, redirect_uris, created_at) VALUES (@client_id, @name, @redirect_uris, @created_at) ON CONFLICT (client_id) DO UPDATE SET name = excluded.name, redirect_uris = excluded.redirect_uris",
      ),
      client: db.prepare("SELECT * FROM oauth_clients WHERE client_id = ?"),
    };
    // Deleting a service account takes its secret, keys and grants in one
    // transaction; its access tokens die with it (verification looks the subject up).
    this.#deleteSubject = db.transaction((clientId: string) => {
      this.#s.deleteKeysOf!.run(clientId);
      this.#s.deleteGrantsOf!.run(clientId);
      this.#s.deleteSa!.run(clientId);
    });
  }

  insertServiceAccount(row: ServiceAccountRow): void {
    this.#s.insertSa!.run(row);
  }

  serviceAccount(clientId: string): ServiceAccountRow | undefined {
    return this.#s.sa!.get(clientId) as ServiceAccountRow | undefined;
  }

  serviceAccountsOf(workspace: string): ServiceAccountRow[] {
    return this.#s.sasOf!.all(workspace) as ServiceAccountRow[];
  }

  updateServiceAccount(row: Pick<ServiceAccountRow, "client_id" | "name" | "description" | "updated_at">): void {
    this.#s.updateSa!.run(row);
  }

  deleteServiceAccount(clientId: string): void {
    this.#changed();
    this.#deleteSubject(clientId);
  }

  insertApiKey(row: ApiKeyRow): void {
    this.#s.insertKey!.run(row);
  }

  apiKeyBySecret(secret: string): ApiKeyRow | undefined {
    return this.#s.keyByHash!.get(digest(secret)) as ApiKeyRow | undefined;
  }

  apiKeysOf(sub: string): ApiKeyRow[] {
    return this.#s.keysOf!.all(sub) as ApiKeyRow[];
  }

  deleteApiKey(sub: string, id: string): boolean {
    this.#changed();
    return this.#s.deleteKey!.run(sub, id).changes === 1;
  }

  putOAuthClient(row: OAuthClientRow): void {
    this.#s.putClient!.run(row);
  }

  /** The registered client and its exact redirect URIs, or undefined. */
  oauthClient(clientId: string): { clientId: string; name: string; redirectUris: string[] } | undefined {
    const row = this.#s.client!.get(clientId) as OAuthClientRow | undefined;
    return row && { clientId: row.client_id, name: row.name, redirectUris: JSON.parse(row.redirect_uris) as string[] };
  }

  insertGrant(row: GrantRow): void {
    this.#s.insertGrant!.run(row);
  }

  /** Returns and removes a grant: codes and refresh tokens are single-use (refresh tokens rotate). */
  takeGrant(secret: string, kind: GrantRow["kind"]): GrantRow | undefined {
    const hash = digest(secret);
    const row = this.#s.grant!.get(hash, kind) as GrantRow | undefined;
    if (row) this.#s.deleteGrant!.run(hash);
    return row;
  }
}
