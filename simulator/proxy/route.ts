import { errors } from "../../src/errors.js";

/**
 * Which sandbox a request is for: `/sbx/{workspace}/{sandbox}/...` (what
 * metadata.url carries), the run-URL form `/{workspace}/sandboxes/{sandbox}/...`
 * (the SDK's fallback when a sandbox has no metadata.url, and the docs'
 * `run.blaxel.ai/{workspace}/sandboxes/{sandbox}/port/3000`), or the seed's
 * host-name pattern `sbx-{sandbox}-{workspaceId}.{region}.localhost[:port]`.
 */

export interface SandboxTarget {
  workspace: string;
  sandbox: string;
  /** Path and query to send to the agent, always starting with "/". */
  path: string;
}

export const PATH_PREFIX = "/sbx/";

export function targetFromPath(url: string): SandboxTarget | undefined {
  if (!url.startsWith(PATH_PREFIX)) return undefined;
  const [workspace, sandbox, ...rest] = splitPath(url, PATH_PREFIX.length);
  return target(workspace, sandbox, rest, url);
}

/** Top-level paths of the simulator itself: never a workspace of the run-URL form. */
export const OWN_PATHS: ReadonlySet<string> = new Set(["v0", "_sim", "health", "sbx", "oauth", "console"]);

/** `/{workspace}/sandboxes/{sandbox}/...`, except `.../previews/...` (a preview URL, simulator/previews). */
export function targetFromRunPath(url: string): SandboxTarget | undefined {
  const [workspace, collection, sandbox, ...rest] = splitPath(url, 1);
  if (collection !== "sandboxes" || !workspace || OWN_PATHS.has(workspace) || rest[0] === "previews") return undefined;
  return target(workspace, sandbox, rest, url);
}

function splitPath(url: string, from: number): string[] {
  const queryAt = url.indexOf("?");
  return (queryAt === -1 ? url : url.slice(0, queryAt)).slice(from).split("/");
}

function target(workspace: string | undefined, sandbox: string | undefined, rest: string[], url: string): SandboxTarget | undefined {
  if (!workspace || !sandbox) return undefined;
  const queryAt = url.indexOf("?");
  try {
    return {
      workspace: decodeURIComponent(workspace),
      sandbox: decodeURIComponent(sandbox),
      path: `/${rest.join("/")}${queryAt === -1 ? "" : url.slice(queryAt)}`,
    };
  } catch {
    return undefined; // malformed percent-encoding: not a sandbox URL
  }
}

/** `/port/{n}` or `/port/{n}/...`: traffic for a server inside the sandbox, not the sandbox API. */
export function isPortPath(path: string): boolean {
  return /^\/port\/\d+(?:[/?]|$)/.test(path);
}

/**
 * `workspaceOfId` maps a workspace id to its name. Sandbox names and ids may
 * both contain "-", so every split is tried, the longest id first.
 */
export function targetFromHost(host: string | undefined, url: string, workspaceOfId: (id: string) => string | undefined): SandboxTarget | undefined {
  // Most requests are control-plane calls on the listen address: skip the parsing for them.
  if (!host || !/^sbx-/i.test(host)) return undefined;
  const hostname = host.replace(/:\d+$/, "").toLowerCase();
  checkHostName(hostname);
  const labels = hostname.split(".");
  if (labels.length !== 3 || labels[2] !== "localhost" || !labels[0]!.startsWith("sbx-")) return undefined;
  const name = labels[0]!.slice("sbx-".length);
  for (let dash = name.indexOf("-"); dash !== -1; dash = name.indexOf("-", dash + 1)) {
    const sandbox = name.slice(0, dash);
    const workspace = workspaceOfId(name.slice(dash + 1));
    if (sandbox && workspace) return { workspace, sandbox, path: url.startsWith("/") ? url : `/${url}` };
  }
  return undefined;
}

/** DNS limits (RFC 1035 §2.3.4): a name of at most 253 bytes, labels of at most 63. */
export const MAX_HOST_NAME = 253;
export const MAX_HOST_LABEL = 63;

/**
 * Refuses a host name DNS could not carry, before any lookup: the split
 * loop above tries one workspace id per "-" of the first label, so an
 * unbounded label (`sbx-` + 7,000 × `a-`) cost ~0.7 s of CPU per
 * anonymous request. One pass over the name, no regular expression.
 */
export function checkHostName(hostname: string): void {
  if (hostname.length > MAX_HOST_NAME) throw errors.badRequest(`Host: a host name has at most ${MAX_HOST_NAME} bytes (this one has ${hostname.length})`);
  let labelStart = 0;
  for (let i = 0; i <= hostname.length; i++) {
    if (i === hostname.length || hostname.charCodeAt(i) === 46 /* . */) {
      if (i - labelStart > MAX_HOST_LABEL) throw errors.badRequest(`Host: a host name label has at most ${MAX_HOST_LABEL} bytes`);
      labelStart = i + 1;
    }
  }
}
