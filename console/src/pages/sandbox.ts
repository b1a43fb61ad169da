import { useState } from "preact/hooks";
import { sandboxBase, type Page } from "../api.js";
import type { ResourceLike } from "../kinds.js";
import { Countdown, ErrorBox, Events, html, Json, link, Section, Status, Time, useAction, useApp, usePoll } from "../ui.js";
import { FilesTab } from "./files.js";
import { ProcessesTab } from "./processes.js";
import { SchedulesTab } from "./schedules.js";
import { TerminalTab } from "./terminal.js";

/**
 * A sandbox's page. Its record comes from the control plane (/v0/sandboxes);
 * files, processes and mounted drives from its agent through the sandbox URL
 * (/sbx/{workspace}/{sandbox}/...), with the same credential.
 */
const TABS = [
  ["overview", "Overview"],
  ["files", "Files"],
  ["processes", "Processes"],
  ["terminal", "Terminal"],
  ["schedules", "Schedules"],
  ["previews", "Previews"],
  ["storage", "Drives & volumes"],
] as const;

export function SandboxPage({ name, tab }: { name: string; tab?: string }) {
  const { api, workspace } = useApp();
  const [fetchedAt, setFetchedAt] = useState(Date.now());
  const polled = usePoll(async () => {
    const s = await api.get<ResourceLike>(`/v0/sandboxes/${encodeURIComponent(name)}`, { workspace });
    setFetchedAt(Date.now());
    return s;
  }, [workspace, name]);
  const current = TABS.some(([id]) => id === tab) ? tab! : "overview";
  const sandbox = polled.data;
  const base = sandboxBase(workspace, name);
  return html`<div class="page">
    <p class="crumbs"><a href=${link("w", workspace, "sandboxes")}>Sandboxes</a> /</p>
    <h1>
      ${name} <${Status} value=${sandbox?.status} />${sandbox?.state === "STANDBY" ? html` <${Status} value="STANDBY" />` : null}
      ${sandbox?.expiresIn !== undefined ? html`<span class="small muted"> expires <${Countdown} seconds=${sandbox.expiresIn} fetchedAt=${fetchedAt} /></span>` : null}
    </h1>
    <${ErrorBox} error=${polled.error} />
    <nav class="tabs" aria-label="Sandbox sections">
      ${TABS.map(([id, label]) => html`<a href=${link("w", workspace, "sandboxes", name, id)} aria-current=${id === current ? "page" : undefined}>${label}</a>`)}
    </nav>
    ${current === "overview" && sandbox ? html`<${Overview} sandbox=${sandbox} name=${name} />` : null}
    ${current === "files" ? html`<${FilesTab} base=${base} />` : null} ${current === "processes" ? html`<${ProcessesTab} base=${base} />` : null}
    ${current === "terminal" ? html`<${TerminalTab} sandbox=${name} base=${base} status=${sandbox?.status} />` : null}
    ${current === "schedules" ? html`<${SchedulesTab} sandbox=${name} base=${base} />` : null}
    ${current === "previews" ? html`<${Previews} sandbox=${name} />` : null}
    ${current === "storage" ? html`<${Storage} sandbox=${sandbox} base=${base} />` : null}
  </div>`;
}

function Overview({ sandbox, name }: { sandbox: ResourceLike; name: string }) {
  const { api, workspace, testHooks } = useApp();
  const action = useAction();
  const runtime = (sandbox.spec?.runtime ?? {}) as { image?: string; memory?: number; ttl?: string };
  const post = (verb: string) => void action.run(() => api.json("POST", `/v0/sandboxes/${encodeURIComponent(name)}/${verb}`, { workspace }));
  // Test hook (POST /_sim/standby): "the first call after standby", on demand.
  const standby = (state: string) => void action.run(() => api.json("POST", "/_sim/standby", { body: { workspace, sandbox: name, state } }));
  const remove = () => {
    if (!confirm(`Delete sandbox "${name}"? Its agent stops and its files are retired.`)) return;
    void action.run(async () => {
      await api.json("DELETE", `/v0/sandboxes/${encodeURIComponent(name)}`, { workspace });
      location.hash = link("w", workspace, "sandboxes");
    });
  };
  return html`<div>
    <dl class="facts">
      <dt>Image</dt>
      <dd><code>${runtime.image}</code></dd>
      <dt>Memory</dt>
      <dd>${runtime.memory} MB</dd>
      <dt>Created</dt>
      <dd><${Time} iso=${sandbox.metadata?.createdAt} /></dd>
      <dt>Sandbox URL</dt>
      <dd><code>${sandbox.metadata?.url}</code></dd>
      <dt>State</dt>
      <dd>
        ${sandbox.state ?? "RUNNING"}${sandbox.state === "STANDBY" ? html` <span class="muted small">(its processes are stopped in place; the next request resumes it)</span>` : null}
      </dd>
      <dt>Last used</dt>
      <dd>${sandbox.lastUsedAt ? html`<${Time} iso=${sandbox.lastUsedAt} />` : html`<span class="muted">not since it started</span>`}</dd>
    </dl>
    <div class="actions">
      ${sandbox.status === "ARCHIVED" ? html`<button onClick=${() => post("unarchive")} disabled=${action.busy}>Unarchive</button>` : html`<button onClick=${() => post("archive")} disabled=${action.busy}>Archive</button>`}
      ${testHooks && sandbox.status === "DEPLOYED" ? html`<button onClick=${() => standby(sandbox.state === "STANDBY" ? "RUNNING" : "STANDBY")} disabled=${action.busy}>${sandbox.state === "STANDBY" ? "Wake" : "Standby"}</button>` : null}
      <button class="danger" onClick=${remove} disabled=${action.busy}>Delete</button>
    </div>
    <${ErrorBox} error=${action.error} />
    <${Section} title="Events"><${Events} events=${sandbox.events} /><//>
    <${Section} title="Spec"><${Json} value=${sandbox.spec} /><//>
  </div>`;
}

interface Preview {
  metadata: { name: string; createdAt?: string };
  spec: { port?: number; public?: boolean; url?: string; prefixUrl?: string };
  status?: string;
}

function Previews({ sandbox }: { sandbox: string }) {
  const { api, workspace } = useApp();
  const path = `/v0/sandboxes/${encodeURIComponent(sandbox)}/previews`;
  const polled = usePoll(() => api.get<Preview[] | Page<Preview>>(path, { workspace }).then((p) => (Array.isArray(p) ? p : p.data)), [workspace, sandbox]);
  const action = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    void action.run(async () => {
      await api.json("POST", path, {
        workspace,
        body: { metadata: { name: String(form.get("name")) }, spec: { port: Number(form.get("port")), public: form.get("public") === "on" } },
      });
      polled.reload();
    });
  };
  const remove = (p: Preview) =>
    void action.run(async () => {
      await api.json("DELETE", `${path}/${encodeURIComponent(p.metadata.name)}`, { workspace });
      polled.reload();
    });
  return html`<${Section} title="Previews">
    <form class="inline-form" onSubmit=${submit}>
      <label>Name <input name="name" required placeholder="web" /></label>
      <label>Port <input name="port" type="number" min="1" max="65535" required placeholder="3000" /></label>
      <label class="check"><input name="public" type="checkbox" /> Public</label>
      <button type="submit" disabled=${action.busy}>Create preview</button>
    </form>
    <${ErrorBox} error=${polled.error} /><${ErrorBox} error=${action.error} />
    <ul class="plain">
      ${polled.data?.map(
        (p) =>
          html`<li>
            <${Status} value=${p.status} /> <strong>${p.metadata.name}</strong> port ${p.spec.port} ${p.spec.public ? "public" : "private"}
            ${p.spec.url ? html` · <a href=${p.spec.url} target="_blank" rel="noopener noreferrer">${p.spec.url}</a>` : null}
            <button class="danger small" onClick=${() => remove(p)}>Delete</button>
          </li>`,
      )}
      ${polled.data?.length === 0 ? html`<li class="muted">No previews.</li>` : null}
    </ul>
  <//>`;
}

interface Mount {
  driveName: string;
  mountPath: string;
  drivePath: string;
  readOnly: boolean;
  backend?: string;
}

function Storage({ sandbox, base }: { sandbox?: ResourceLike; base: string }) {
  const { api, workspace } = useApp();
  const mounts = usePoll(() => api.get<{ mounts: Mount[] }>(`${base}/drives/mount`, { workspace }), [base]);
  const action = useAction();
  const volumes = (sandbox?.spec?.volumes ?? []) as { name?: string; mountPath?: string; readOnly?: boolean }[];
  const mount = (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    void action.run(async () => {
      await api.json("POST", `${base}/drives/mount`, {
        workspace,
        body: {
          driveName: String(form.get("driveName")),
          mountPath: String(form.get("mountPath")),
          drivePath: String(form.get("drivePath") || "/"),
          readOnly: form.get("readOnly") === "on",
        },
      });
      mounts.reload();
    });
  };
  const unmount = (m: Mount) =>
    void action.run(async () => {
      await api.json("DELETE", `${base}/drives/mount/${encodeURIComponent(m.mountPath.replace(/^\//, ""))}`, { workspace });
      mounts.reload();
    });
  return html`<div>
    <${Section} title="Mounted drives">
      <form class="inline-form" onSubmit=${mount}>
        <label>Drive <input name="driveName" required placeholder="team" /></label>
        <label>Mount path <input name="mountPath" required placeholder="/mnt/team" /></label>
        <label>Drive path <input name="drivePath" placeholder="/" /></label>
        <label class="check"><input name="readOnly" type="checkbox" /> Read-only</label>
        <button type="submit" disabled=${action.busy}>Mount</button>
      </form>
      <${ErrorBox} error=${mounts.error} /><${ErrorBox} error=${action.error} />
      <ul class="plain">
        ${mounts.data?.mounts.map(
          (m) =>
            html`<li>
              <strong>${m.driveName}</strong>${m.drivePath} at <code>${m.mountPath}</code> ${m.readOnly ? "(read-only)" : ""}
              <span class="muted">${m.backend}</span> <button class="small" onClick=${() => unmount(m)}>Unmount</button>
            </li>`,
        )}
        ${mounts.data?.mounts.length === 0 ? html`<li class="muted">No drive mounted. Drives of the workspace are listed under <a href=${link("w", workspace, "drives")}>Drives</a>.</li>` : null}
      </ul>
    <//>
    <${Section} title="Volumes (spec.volumes)">
      <ul class="plain">
        ${volumes.map((v) => html`<li><a href=${link("w", workspace, "volumes", v.name ?? "")}>${v.name}</a> at <code>${v.mountPath}</code> ${v.readOnly ? "(read-only)" : ""}</li>`)}
        ${volumes.length === 0 ? html`<li class="muted">No volume attached.</li>` : null}
      </ul>
    <//>
  </div>`;
}
