import { useState } from "preact/hooks";
import { ErrorBox, formValues, html, Section, Time, useAction, useApp, usePoll } from "../ui.js";

/**
 * Service accounts of the workspace and their API keys. A client secret or
 * key value is returned once, on create: the console shows it once, with a
 * copy button, and never again (lists carry no secret; it keeps none).
 */
interface ServiceAccount {
  client_id: string;
  name: string;
  description?: string;
  created_at?: string;
}

interface ApiKey {
  id: string;
  name: string;
  apiKey?: string;
  expires_in?: string;
  createdAt?: string;
  createdBy?: string;
}

type Secret = { label: string; value: string; extra?: string };

export function ServiceAccountsPage() {
  const { api, workspace } = useApp();
  const list = usePoll(() => api.get<ServiceAccount[]>("/v0/service_accounts", { workspace }), [workspace], 5000);
  const [secret, setSecret] = useState<Secret | undefined>();
  const [open, setOpen] = useState<string | undefined>();
  const action = useAction();
  const create = (event: Event) => {
    const v = formValues(event);
    const form = event.currentTarget as HTMLFormElement;
    void action.run(async () => {
      const sa = await api.json<ServiceAccount & { client_secret: string }>("POST", "/v0/service_accounts", {
        workspace,
        body: { name: v.name, ...(v.description ? { description: v.description } : {}) },
      });
      setSecret({ label: `Client secret of ${sa.name}`, value: sa.client_secret, extra: `client_id ${sa.client_id}` });
      form.reset();
      list.reload();
    });
  };
  const remove = (sa: ServiceAccount) => {
    if (!confirm(`Delete service account "${sa.name}"? Its secret, API keys and tokens stop working at once.`)) return;
    void action.run(async () => {
      await api.json("DELETE", `/v0/service_accounts/${encodeURIComponent(sa.client_id)}`, { workspace });
      list.reload();
    });
  };
  return html`<div class="page">
    <h1>Service accounts <span class="muted small">in ${workspace}</span></h1>
    <${OnceSecret} secret=${secret} onDone=${() => setSecret(undefined)} />
    <${Section} title="New service account">
      <form class="inline-form" onSubmit=${create}>
        <label>Name <input name="name" required maxlength="63" placeholder="ci" /></label>
        <label class="grow">Description <input name="description" maxlength="500" /></label>
        <button type="submit" disabled=${action.busy}>Create</button>
      </form>
      <${ErrorBox} error=${action.error} />
    <//>
    <${ErrorBox} error=${list.error} />
    ${list.data?.length === 0 ? html`<p class="muted">No service accounts.</p>` : null}
    ${list.data?.map(
      (sa) =>
        html`<${Section}
          title=${sa.name}
          actions=${html` <button
              class="small"
              aria-expanded=${open === sa.client_id}
              onClick=${() => setOpen(open === sa.client_id ? undefined : sa.client_id)}
            >
              API keys
            </button>
            <button class="small danger" onClick=${() => remove(sa)}>Delete</button>`}
        >
          <p class="small muted">
            client_id <code>${sa.client_id}</code> · created <${Time} iso=${sa.created_at} /> ${sa.description ? `· ${sa.description}` : ""}
          </p>
          ${open === sa.client_id ? html`<${ApiKeys} sa=${sa} onSecret=${setSecret} />` : null}
        <//>`,
    )}
  </div>`;
}

function ApiKeys({ sa, onSecret }: { sa: ServiceAccount; onSecret: (s: Secret) => void }) {
  const { api, workspace } = useApp();
  const path = `/v0/service_accounts/${encodeURIComponent(sa.client_id)}/api_keys`;
  const keys = usePoll(() => api.get<ApiKey[]>(path, { workspace }), [workspace, sa.client_id], 5000);
  const action = useAction();
  const create = (event: Event) => {
    const v = formValues(event);
    const form = event.currentTarget as HTMLFormElement;
    void action.run(async () => {
      const key = await api.json<ApiKey>("POST", path, {
        workspace,
        body: { ...(v.name ? { name: v.name } : {}), ...(v.expires_in ? { expires_in: v.expires_in } : {}) },
      });
      onSecret({ label: `API key ${key.name || key.id} of ${sa.name}`, value: key.apiKey ?? "" });
      form.reset();
      keys.reload();
    });
  };
  const remove = (key: ApiKey) =>
    void action.run(async () => {
      await api.json("DELETE", `${path}/${encodeURIComponent(key.id)}`, { workspace });
      keys.reload();
    });
  return html`<div class="subpanel">
    <form class="inline-form" onSubmit=${create}>
      <label>Key name <input name="name" maxlength="63" /></label>
      <label>Expires in <input name="expires_in" placeholder="30d" /></label>
      <button type="submit" disabled=${action.busy}>New API key</button>
    </form>
    <${ErrorBox} error=${keys.error} /><${ErrorBox} error=${action.error} />
    <ul class="plain">
      ${keys.data?.map(
        (k) =>
          html`<li>
            <strong>${k.name || "(unnamed)"}</strong> <code>sim_••••••••</code>
            <span class="muted small">id ${k.id} · created <${Time} iso=${k.createdAt} />${k.expires_in ? ` · expires in ${k.expires_in}` : ""}</span>${" "}
            <button class="small danger" onClick=${() => remove(k)}>Revoke</button>
          </li>`,
      )}
      ${keys.data?.length === 0 ? html`<li class="muted">No API keys.</li>` : null}
    </ul>
  </div>`;
}

function OnceSecret({ secret, onDone }: { secret?: Secret; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  if (!secret) return null;
  const copy = () =>
    void navigator.clipboard?.writeText(secret.value).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  return html`<div class="secret" role="status">
    <p><strong>${secret.label}</strong> ${secret.extra ? html`<span class="muted">(${secret.extra})</span>` : null}</p>
    <p>Copy it now: it is shown this once and cannot be read again.</p>
    <code class="secret-value" data-secret>${secret.value}</code>
    <div class="actions">
      <button class="small" onClick=${copy}>${copied ? "Copied" : "Copy"}</button>
      <button
        class="small"
        onClick=${() => {
          setCopied(false);
          onDone();
        }}
      >
        I saved it
      </button>
    </div>
  </div>`;
}
