import { useState } from "preact/hooks";
import { type Page } from "../api.js";
import { createdAtOf, nameOf, updatedAtOf, type Kind, type ResourceLike } from "../kinds.js";
import { PagedList, type Column } from "../list.js";
import { Countdown, ErrorBox, Events, formValues, html, Json, link, parseJsonInput, Section, Status, Time, useAction, useApp, usePoll } from "../ui.js";
import { JobExecutions } from "./jobs.js";

/** Every resource kind as a paged, sortable list; a generic page per resource (status, events, spec, delete). */

function columnsFor(kind: Kind, workspace: string, fetchedAt: () => number): Column<ResourceLike>[] {
  const name: Column<ResourceLike> = {
    label: "Name",
    sort: "name",
    render: (item) => (kind.noDetail ? nameOf(item) : html`<a href=${link("w", workspace, kind.id, nameOf(item))}>${nameOf(item)}</a>`),
  };
  const cols: Column<ResourceLike>[] = [name, { label: "Status", render: (item) => html`<${Status} value=${item.status} />` }];
  if (kind.id === "sandboxes") {
    cols.push({ label: "Image", className: "wide", render: (item) => String((item.spec?.runtime as { image?: string } | undefined)?.image ?? "") });
    cols.push({ label: "Expires", render: (item) => html`<${Countdown} seconds=${item.expiresIn} fetchedAt=${fetchedAt()} />` });
  }
  if (kind.id === "schedules") {
    cols.push({
      label: "Sandbox",
      render: (item) => {
        const s = (item as { sandbox?: string }).sandbox ?? "";
        return html`<a href=${link("w", workspace, "sandboxes", s, "schedules")}>${s}</a>`;
      },
    });
    cols.push({
      label: "When",
      render: (item) => {
        const s = item as { type?: string; value?: string };
        return `${s.type} ${s.value}`;
      },
    });
  }
  // List items carry no events (the API leaves them out of lists): each item's page shows them, refreshed live.
  cols.push({ label: "Created", sort: "createdAt", render: (item) => html`<${Time} iso=${createdAtOf(item)} />` });
  cols.push({ label: "Updated", render: (item) => html`<${Time} iso=${updatedAtOf(item)} />` });
  return cols;
}

export function ResourceListPage({ kind }: { kind: Kind }) {
  const { api, workspace } = useApp();
  let fetchedAt = Date.now();
  const load = (query: Record<string, string | number | undefined>) =>
    api.get<ResourceLike[] | Page<ResourceLike>>(`/v0${kind.path}`, { workspace, query }).then((page) => {
      fetchedAt = Date.now();
      return page;
    });
  return html`<div class="page">
    <h1>${kind.label} <span class="muted small">in ${workspace}</span></h1>
    ${kind.id === "sandboxes" ? html`<${CreateSandbox} />` : kind.example ? html`<${CreateFromJson} kind=${kind} />` : null}
    <${PagedList}
      key=${`${workspace}/${kind.id}`}
      label=${kind.label}
      load=${load}
      columns=${columnsFor(kind, workspace, () => fetchedAt)}
      rowKey=${(item: ResourceLike) => nameOf(item)}
      sortFields=${kind.sortFields}
      deps=${[workspace, kind.id]}
    />
  </div>`;
}

function CreateSandbox() {
  const { api, workspace } = useApp();
  const action = useAction();
  const submit = (event: Event) => {
    const v = formValues(event);
    const runtime: Record<string, unknown> = { image: v.image || "blaxel/base-image:latest", memory: Number(v.memory) || 4096 };
    if (v.ttl) runtime.ttl = v.ttl;
    void action.run(async () => {
      await api.json("POST", "/v0/sandboxes", { workspace, body: { metadata: { name: v.name }, spec: { runtime } } });
      location.hash = link("w", workspace, "sandboxes", v.name!);
    });
  };
  return html`<details class="create" open>
    <summary>New sandbox</summary>
    <form class="inline-form" onSubmit=${submit}>
      <label>Name <input name="name" required pattern="[a-z0-9]([a-z0-9-]*[a-z0-9])?" placeholder="my-sandbox" /></label>
      <label>Image <input name="image" placeholder="blaxel/base-image:latest" /></label>
      <label>Memory (MB) <input name="memory" type="number" min="128" step="128" placeholder="4096" /></label>
      <label>TTL <input name="ttl" placeholder="e.g. 1h" /></label>
      <button type="submit" disabled=${action.busy}>${action.busy ? "Creating…" : "Create sandbox"}</button>
    </form>
    <${ErrorBox} error=${action.error} />
  </details>`;
}

function CreateFromJson({ kind }: { kind: Kind }) {
  const { api, workspace } = useApp();
  const action = useAction();
  const [text, setText] = useState(JSON.stringify(kind.example, null, 2));
  const submit = (event: Event) => {
    event.preventDefault();
    void action.run(async () => {
      const body = parseJsonInput(text);
      await api.json("POST", `/v0${kind.path}`, { workspace, body });
      const name = nameOf(body);
      if (name && !kind.noDetail) location.hash = link("w", workspace, kind.id, name);
    });
  };
  return html`<details class="create">
    <summary>Create from JSON</summary>
    <form onSubmit=${submit}>
      <label class="block"
        >Body of POST /v0${kind.path}
        <textarea rows="8" spellcheck="false" value=${text} onInput=${(e: Event) => setText((e.currentTarget as HTMLTextAreaElement).value)}></textarea>
      </label>
      <button type="submit" disabled=${action.busy}>Create</button>
    </form>
    <${ErrorBox} error=${action.error} />
  </details>`;
}

export function ResourceDetailPage({ kind, name }: { kind: Kind; name: string }) {
  const { api, workspace } = useApp();
  const [fetchedAt, setFetchedAt] = useState(Date.now());
  const polled = usePoll(async () => {
    const item = await api.get<ResourceLike>(`/v0${kind.path}/${encodeURIComponent(name)}`, { workspace });
    setFetchedAt(Date.now());
    return item;
  }, [workspace, kind.id, name]);
  const action = useAction();
  const remove = () => {
    if (!confirm(`Delete ${kind.label.toLowerCase()} "${name}"?`)) return;
    void action.run(async () => {
      await api.json("DELETE", `/v0${kind.path}/${encodeURIComponent(name)}`, { workspace });
      location.hash = link("w", workspace, kind.id);
    });
  };
  const item = polled.data;
  return html`<div class="page">
    <p class="crumbs"><a href=${link("w", workspace, kind.id)}>${kind.label}</a> /</p>
    <h1>${name} <${Status} value=${item?.status} /></h1>
    <${ErrorBox} error=${polled.error} />
    <${ErrorBox} error=${action.error} />
    ${
      item
        ? html` <dl class="facts">
              <dt>Created</dt>
              <dd><${Time} iso=${createdAtOf(item)} /></dd>
              <dt>Updated</dt>
              <dd><${Time} iso=${updatedAtOf(item)} /></dd>
              ${
                item.expiresIn !== undefined
                  ? html`<dt>Expires</dt>
                      <dd><${Countdown} seconds=${item.expiresIn} fetchedAt=${fetchedAt} /></dd>`
                  : null
              }
              ${
                item.metadata?.url
                  ? html`<dt>URL</dt>
                      <dd><code>${item.metadata.url}</code></dd>`
                  : null
              }
            </dl>
            <div class="actions"><button class="danger" onClick=${remove} disabled=${action.busy}>Delete</button></div>
            ${kind.id === "jobs" ? html`<${JobExecutions} job=${name} />` : null}
            <${Section} title="Events"><${Events} events=${item.events} /><//>
            <${Section} title="Spec"><${Json} value=${item.spec ?? item} /><//>`
        : null
    }
  </div>`;
}

interface Workspace {
  name: string;
  displayName?: string;
  accountId?: string;
  region?: string;
  status?: string;
  resourceCounts?: Record<string, number>;
}

export function WorkspacesPage() {
  const { api, workspaces } = useApp();
  const polled = usePoll(
    () => Promise.all(workspaces.map((w) => api.get<Workspace>(`/v0/workspaces/${encodeURIComponent(w)}`, { query: { countResources: true } }))),
    [workspaces.join(",")],
    5000,
  );
  return html`<div class="page">
    <h1>Workspaces</h1>
    <p class="muted">The workspaces this credential belongs to (GET /v0/workspaces).</p>
    <${ErrorBox} error=${polled.error} />
    <div class="cards">
      ${polled.data?.map(
        (w) =>
          html`<a class="card" href=${link("w", w.name, "sandboxes")}>
            <h2>${w.displayName || w.name}</h2>
            <p class="muted">${w.name} · account ${w.accountId} · ${w.region}</p>
            <ul class="counts">
              ${Object.entries(w.resourceCounts ?? {}).map(([k, n]) => html`<li><strong>${n}</strong> ${n === 1 ? k : k.replace(/y$/, "ie") + "s"}</li>`)}
            </ul>
          </a>`,
      )}
    </div>
  </div>`;
}
