import type { Migration } from "../../src/sqlite.js";

/**
 * The simulator's whole state. Workspace resources of every kind share one
 * table keyed by (workspace, kind, parent, name) holding the JSON document;
 * `created_ms`/`name` index the list orders, `search` holds the lower-cased
 * text `q` matches (name, displayName, label keys and values).
 */
export const SIMULATOR_MIGRATIONS: readonly Migration[] = [
  {
    id: "simulator/001-init",
    sql: `
      CREATE TABLE accounts (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL);
      CREATE TABLE workspaces (
        name TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        doc TEXT NOT NULL, created_ms INTEGER NOT NULL);
      CREATE TABLE users (
        sub TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
        role TEXT NOT NULL, created_at TEXT NOT NULL);
      CREATE TABLE memberships (
        sub TEXT NOT NULL REFERENCES users(sub) ON DELETE CASCADE,
        workspace TEXT NOT NULL REFERENCES workspaces(name) ON DELETE CASCADE,
        role TEXT NOT NULL, PRIMARY KEY (sub, workspace));
      CREATE TABLE service_accounts (
        client_id TEXT PRIMARY KEY, workspace TEXT NOT NULL REFERENCES workspaces(name) ON DELETE CASCADE,
        name TEXT NOT NULL, description TEXT NOT NULL DEFAULT '', secret_hash TEXT NOT NULL,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY, key_hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL DEFAULT '',
        sub TEXT NOT NULL, sub_type TEXT NOT NULL, expires_in TEXT, expires_ms INTEGER,
        created_at TEXT NOT NULL, created_by TEXT NOT NULL DEFAULT '');
      CREATE INDEX api_keys_sub ON api_keys(sub);
      CREATE TABLE oauth_grants (
        token_hash TEXT PRIMARY KEY, kind TEXT NOT NULL, sub TEXT NOT NULL, sub_type TEXT NOT NULL,
        client_id TEXT NOT NULL, redirect_uri TEXT NOT NULL DEFAULT '', scope TEXT NOT NULL,
        expires_ms INTEGER NOT NULL);
      CREATE TABLE resources (
        workspace TEXT NOT NULL, kind TEXT NOT NULL, parent TEXT NOT NULL DEFAULT '', name TEXT NOT NULL,
        created_ms INTEGER NOT NULL, status TEXT NOT NULL DEFAULT '', search TEXT NOT NULL DEFAULT '',
        doc TEXT NOT NULL, PRIMARY KEY (workspace, kind, parent, name));
      CREATE INDEX resources_by_created ON resources(workspace, kind, parent, created_ms, name);
    `,
  },
  {
    // Registered OAuth clients of the authorization-code flow: a code goes only to a registered redirect URI.
    id: "simulator/002-oauth-clients",
    sql: "CREATE TABLE oauth_clients (client_id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', redirect_uris TEXT NOT NULL, created_at TEXT NOT NULL)",
  },
];
