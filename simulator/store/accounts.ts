import type { Statement } from "better-sqlite3";
import type { Db } from "../../src/sqlite.js";
import { toIso as iso } from "../../src/clock.js";

export type Role = "admin" | "member";

export interface AccountRow {
  id: string;
  name: string;
  created_at: string;
}
export interface UserRow {
  sub: string;
  email: string;
  account_id: string;
  role: Role;
  created_at: string;
}
export interface WorkspaceRecord {
  name: string;
  accountId: string;
  createdMs: number;
  /** The Workspace document as rendered (flat: name, displayName, id, accountId, labels, ...). */
  doc: Record<string, unknown>;
}

/** Accounts, workspaces, users and their workspace memberships. */
export class AccountStore {
  readonly #s: Record<string, Statement>;
  /** Called after every change that can alter who may do what (cached principals are dropped). */
  readonly #changed: () => void;

  constructor(db: Db, changed: () => void = () => {}) {
    this.#changed = changed;
    this.#s = {
      insertAccount: db.prepare("INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name"),
      account: db.prepare("SELECT * FROM accounts WHERE id = ?"),
      accounts: db.prepare("SELECT * FROM accounts ORDER BY id"),
      insertWorkspace: db.prepare("INSERT INTO workspaces (name, account_id, doc, created_ms) VALUES (?, ?, ?, ?)"),
      updateWorkspace: db.prepare("UPDATE workspaces SET doc = ? WHERE name = ?"),
      deleteWorkspace: db.prepare("DELETE FROM workspaces WHERE name = ?"),
      deleteWorkspaceResources: db.prepare("DELETE FROM resources WHERE workspace = ?"),
      workspace: db.prepare("SELECT * FROM workspaces WHERE name = ?"),
      workspacesOfAccount: db.prepare("SELECT * FROM workspaces WHERE account_id = ? ORDER BY created_ms, name"),
      workspaceNamesOfAccount: db.prepare("SELECT name FROM workspaces WHERE account_id = ? ORDER BY created_ms, name").pluck(),
      allWorkspaces: db.prepare("SELECT * FROM workspaces ORDER BY created_ms, name"),
      insertUser: db.prepare("INSERT INTO users (sub, email, account_id, role, created_at) VALUES (?, ?, ?, ?, ?)"),
      user: db.prepare("SELECT * FROM users WHERE sub = ?"),
      userByEmail: db.prepare("SELECT * FROM users WHERE email = ?"),
      upsertMembership: db.prepare(
        "INSERT INTO memberships (sub, workspace, role) VALUES (?, ?, ?) ON CONFLICT(sub, workspace) DO UPDATE SET role = excluded.role",
      ),
      deleteMembership: db.prepare("DELETE FROM memberships WHERE sub = ? AND workspace = ?"),
      membershipsOfUser: db.prepare("SELECT workspace, role FROM memberships WHERE sub = ?"),
      membersOfWorkspace: db.prepare("SELECT u.*, m.role AS ws_role FROM memberships m JOIN users u ON u.sub = m.sub WHERE m.workspace = ? ORDER BY u.email"),
    };
  }

  putAccount(id: string, name: string, nowMs: number): void {
    this.#changed();
    this.#s.insertAccount!.run(id, name, iso(nowMs));
  }

  account(id: string): AccountRow | undefined {
    return this.#s.account!.get(id) as AccountRow | undefined;
  }

  accounts(): AccountRow[] {
    return this.#s.accounts!.all() as AccountRow[];
  }

  insertWorkspace(record: WorkspaceRecord): void {
    this.#changed();
    this.#s.insertWorkspace!.run(record.name, record.accountId, JSON.stringify(record.doc), record.createdMs);
  }

  updateWorkspace(name: string, doc: Record<string, unknown>): void {
    this.#s.updateWorkspace!.run(JSON.stringify(doc), name);
  }

  /** Deletes the workspace and everything in it. */
  deleteWorkspace(name: string): void {
    this.#changed();
    this.#s.deleteWorkspaceResources!.run(name);
    this.#s.deleteWorkspace!.run(name);
  }

  workspace(name: string): WorkspaceRecord | undefined {
    return toWorkspace(this.#s.workspace!.get(name));
  }

  workspacesOfAccount(accountId: string): WorkspaceRecord[] {
    return (this.#s.workspacesOfAccount!.all(accountId) as unknown[]).map((r) => toWorkspace(r)!);
  }

  /** Names only: read on every request by authentication, so no JSON parsing. */
  workspaceNamesOfAccount(accountId: string): string[] {
    return this.#s.workspaceNamesOfAccount!.all(accountId) as string[];
  }

  allWorkspaces(): WorkspaceRecord[] {
    return (this.#s.allWorkspaces!.all() as unknown[]).map((r) => toWorkspace(r)!);
  }

  insertUser(user: UserRow): void {
    this.#changed();
    this.#s.insertUser!.run(user.sub, user.email, user.account_id, user.role, user.created_at);
  }

  user(sub: string): UserRow | undefined {
    return this.#s.user!.get(sub) as UserRow | undefined;
  }

  userByEmail(email: string): UserRow | undefined {
    return this.#s.userByEmail!.get(email.toLowerCase()) as UserRow | undefined;
  }

  setMembership(sub: string, workspace: string, role: Role): void {
    this.#changed();
    this.#s.upsertMembership!.run(sub, workspace, role);
  }

  removeMembership(sub: string, workspace: string): boolean {
    this.#changed();
    return this.#s.deleteMembership!.run(sub, workspace).changes === 1;
  }

  membershipsOf(sub: string): { workspace: string; role: Role }[] {
    return this.#s.membershipsOfUser!.all(sub) as { workspace: string; role: Role }[];
  }

  membersOf(workspace: string): (UserRow & { ws_role: Role })[] {
    return this.#s.membersOfWorkspace!.all(workspace) as (UserRow & { ws_role: Role })[];
  }
}

function toWorkspace(row: unknown): WorkspaceRecord | undefined {
  if (!row) return undefined;
  const r = row as { name: string; account_id: string; doc: string; created_ms: number };
  return { name: r.name, accountId: r.account_id, createdMs: r.created_ms, doc: JSON.parse(r.doc) as Record<string, unknown> };
}
