import { OWN_PATHS } from "../proxy/route.js";

/**
 * Where a preview answers (pure). Two forms, both always served:
 * - path: `{base}/{workspace}/sandboxes/{sandbox}/previews/{preview}/...`, the
 *   default `spec.url` (resolves everywhere, Node's fetch included); a
 *   preview with a prefixUrl is `{base}/{workspace}/previews/{prefixUrl}/...`
 *   instead (prefixUrl is unique in the workspace), so its URL carries the
 *   prefix as the platform's does (the SDK's preview test checks it);
 * - host: `http://{label}.preview.localhost:{port}/...` as on the platform
 *   (`<id>.preview.bl.run`), where label is `{prefixUrl}-{workspace}` when
 *   the preview has a prefixUrl (the platform's `myprefix-workspace` form),
 *   else `{preview}-{sandbox}-{workspace}`. Browsers resolve `*.localhost`
 *   to the loopback; Node's resolver does not, so send the Host header there.
 */

export type PreviewUrlForm = "path" | "host";

export interface PreviewAddress {
  workspace: string;
  sandbox: string;
  preview: string;
  /** The path (and query) under the preview, always starting with "/". */
  rest: string;
  /** The path the preview's cookie is scoped to. */
  cookiePath: string;
}

const PATH_FORM = /^\/([^/?]+)\/sandboxes\/([^/?]+)\/previews\/([^/?]+)(.*)$/;

export function previewFromPath(url: string): PreviewAddress | undefined {
  const match = PATH_FORM.exec(url);
  if (!match || OWN_PATHS.has(match[1]!)) return undefined; // /v0/sandboxes/{sb}/previews/{name} is the control plane's
  try {
    const [workspace, sandbox, preview] = [match[1]!, match[2]!, match[3]!].map(decodeURIComponent) as [string, string, string];
    const tail = match[4]!;
    const rest = tail.startsWith("/") ? tail : `/${tail}`;
    return { workspace, sandbox, preview, rest, cookiePath: `/${match[1]}/sandboxes/${match[2]}/previews/${match[3]}` };
  } catch {
    return undefined; // malformed percent-encoding
  }
}

/** A preview addressed by its workspace's prefixUrl: `/{workspace}/previews/{prefixUrl}/...`. */
export interface PrefixedPreviewAddress {
  workspace: string;
  prefix: string;
  rest: string;
  cookiePath: string;
}

const PREFIX_PATH_FORM = /^\/([^/?]+)\/previews\/([a-z0-9-]+)(?=[/?]|$)(.*)$/;

export function prefixedPreviewFromPath(url: string): PrefixedPreviewAddress | undefined {
  const match = PREFIX_PATH_FORM.exec(url);
  if (!match || OWN_PATHS.has(match[1]!)) return undefined;
  try {
    const workspace = decodeURIComponent(match[1]!);
    const tail = match[3]!;
    return { workspace, prefix: match[2]!, rest: tail.startsWith("/") ? tail : `/${tail}`, cookiePath: `/${match[1]}/previews/${match[2]}` };
  } catch {
    return undefined; // malformed percent-encoding
  }
}

/** The label of a `{label}.preview.{domain}[:port]` host, lower-cased; undefined for any other host. */
export function previewHostLabel(host: string | undefined): string | undefined {
  if (!host) return undefined;
  const match = /^([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)\.preview\./i.exec(host);
  return match?.[1]?.toLowerCase();
}

export function hostLabel(workspace: string, sandbox: string, preview: string, prefixUrl: string | undefined): string {
  return prefixUrl ? `${prefixUrl}-${workspace}` : `${preview}-${sandbox}-${workspace}`;
}

/** The candidates a host label may stand for, given the workspaces that exist (names may contain "-"). */
export function labelCandidates(label: string, workspaces: string[]): { workspace: string; prefix: string; splits: { preview: string; sandbox: string }[] }[] {
  const out: { workspace: string; prefix: string; splits: { preview: string; sandbox: string }[] }[] = [];
  for (const workspace of workspaces) {
    if (!label.endsWith(`-${workspace}`)) continue;
    const prefix = label.slice(0, -workspace.length - 1);
    const splits: { preview: string; sandbox: string }[] = [];
    for (let dash = prefix.indexOf("-"); dash !== -1; dash = prefix.indexOf("-", dash + 1)) {
      const preview = prefix.slice(0, dash);
      const sandbox = prefix.slice(dash + 1);
      if (preview && sandbox) splits.push({ preview, sandbox });
    }
    out.push({ workspace, prefix, splits });
  }
  return out;
}

/** The URL written into a preview's spec.url. */
export function previewUrl(base: string, form: PreviewUrlForm, workspace: string, sandbox: string, preview: string, prefixUrl: string | undefined): string {
  if (form === "path") return prefixUrl ? `${base}/${workspace}/previews/${prefixUrl}` : `${base}/${workspace}/sandboxes/${sandbox}/previews/${preview}`;
  const url = new URL(base);
  const domain = /^[\d.]+$|^\[|^localhost$/i.test(url.hostname) ? "localhost" : url.hostname;
  return `${url.protocol}//${hostLabel(workspace, sandbox, preview, prefixUrl)}.preview.${domain}${url.port ? `:${url.port}` : ""}`;
}

/** The query without `bl_preview_token` (a credential for the simulator, never the app's). */
export function withoutTokenParam(rest: string): string {
  const queryAt = rest.indexOf("?");
  if (queryAt === -1 || !rest.includes("bl_preview_token")) return rest;
  const kept = rest
    .slice(queryAt + 1)
    .split("&")
    .filter((p) => p.split("=")[0] !== "bl_preview_token");
  return kept.length > 0 ? `${rest.slice(0, queryAt)}?${kept.join("&")}` : rest.slice(0, queryAt);
}
