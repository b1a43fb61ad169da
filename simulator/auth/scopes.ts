/**
 * OAuth scopes of the seed (exact values). `admin` covers every operation.
 * Every operation names the scope it needs (an operation without
 * one let a token scoped `sandboxes:get`, or a drive's access token, mint a
 * service account); operations whose resource has no scope of its own in this
 * list (drives, images, VPCs, service accounts...) need `admin`.
 */
export const SCOPES = [
  "admin",
  "agents:create",
  "agents:delete",
  "agents:get",
  "agents:list",
  "agents:update",
  "apiKey:list",
  "apiKey:write",
  "applications:create",
  "applications:delete",
  "applications:get",
  "applications:list",
  "applications:update",
  "configurations:list",
  "customdomains:create",
  "customdomains:delete",
  "customdomains:get",
  "customdomains:list",
  "customdomains:update",
  "functions:create",
  "functions:delete",
  "functions:get",
  "functions:list",
  "functions:update",
  "integrations:create",
  "integrations:list",
  "invitations:list",
  "jobs:create",
  "jobs:delete",
  "jobs:get",
  "jobs:list",
  "jobs:update",
  "locations:list",
  "mcphub:list",
  "models:create",
  "models:delete",
  "models:get",
  "models:list",
  "models:update",
  "policies:create",
  "policies:delete",
  "policies:get",
  "policies:list",
  "policies:update",
  "sandboxes:control",
  "sandboxes:create",
  "sandboxes:delete",
  "sandboxes:get",
  "sandboxes:list",
  "sandboxes:update",
  "sandboxhub:list",
  "templates:get",
  "templates:list",
  "volumeTemplates:create",
  "volumeTemplates:delete",
  "volumeTemplates:get",
  "volumeTemplates:list",
  "volumeTemplates:upsert",
  "volumes:create",
  "volumes:delete",
  "volumes:get",
  "volumes:list",
  "workspaces:accept",
  "workspaces:create",
  "workspaces:decline",
  "workspaces:delete",
  "workspaces:get",
  "workspaces:invite",
  "workspaces:leave",
  "workspaces:list",
  "workspaces:remove",
  "workspaces:update",
] as const;

export type Scope = (typeof SCOPES)[number];
const KNOWN = new Set<string>(SCOPES);

export function isScope(value: string): value is Scope {
  return KNOWN.has(value);
}

/** `resource:verb` when the seed lists it, else `admin`. */
export function scopeFor(resource: string | undefined, verb: string): Scope {
  const candidate = `${resource}:${verb}`;
  return resource && isScope(candidate) ? candidate : "admin";
}

/**
 * Whether a credential's scopes allow an operation. `alsoGrantedBy` names a
 * narrower scope that allows it too: a drive's access token carries
 * `drive:<name>` and may read that drive, nothing else.
 */
export function grants(scopes: ReadonlySet<string>, needed: Scope, alsoGrantedBy?: string): boolean {
  return scopes.has("admin") || scopes.has(needed) || (alsoGrantedBy !== undefined && scopes.has(alsoGrantedBy));
}

/** Parses a space-separated scope request; unknown values are reported by name. */
export function parseScopeList(value: string | undefined): { scopes: string[]; unknown: string[] } {
  const requested = (value ?? "").split(/[\s,]+/).filter(Boolean);
  return { scopes: requested.filter(isScope), unknown: requested.filter((s) => !isScope(s)) };
}
