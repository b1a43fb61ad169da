import { useState } from "preact/hooks";
import type { Page } from "../api.js";
import { PagedList, type ListQuery } from "../list.js";
import { ErrorBox, formValues, html, Section, Status, Time, useAction, useApp, usePoll } from "../ui.js";

/** A job's executions: start one (tasks as JSON), their statuses and tasks, cancel (DELETE, as the API names it). */

interface Task {
  metadata: { name: string; startedAt?: string; completedAt?: string };
  status: string;
  conditions?: { reason?: string; message?: string }[];
}

interface Execution {
  metadata: { id: string; createdAt?: string; startedAt?: string; completedAt?: string };
  status: string;
  stats?: Record<string, number>;
  tasks?: Task[];
}

const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timeout"]);

export function JobExecutions({ job }: { job: string }) {
  const { api, workspace } = useApp();
  const base = `/v0/jobs/${encodeURIComponent(job)}/executions`;
  const start = useAction();
  const cancel = useAction();
  const [open, setOpen] = useState<string | undefined>();
  const [version, setVersion] = useState(0);
  const submit = (event: Event) => {
    const v = formValues(event);
    void start.run(async () => {
      const tasks = v.tasks ? (JSON.parse(v.tasks) as unknown[]) : undefined;
      const created = await api.json<{ id: string }>("POST", base, { workspace, body: tasks ? { tasks } : {} });
      setOpen(created.id);
      setVersion((n) => n + 1);
    });
  };
  const load = (query: ListQuery) => api.get<Page<Execution>>(base, { workspace, query: { ...query } });
  return html`<${Section} title="Executions">
    <form class="inline-form" onSubmit=${submit}>
      <label class="grow">Tasks (JSON array, optional) <input name="tasks" placeholder='[{"duration":"5s"},{"fail":true}]' /></label>
      <button type="submit" disabled=${start.busy}>Start execution</button>
    </form>
    <${ErrorBox} error=${start.error} />
    <${ErrorBox} error=${cancel.error} />
    <${PagedList}
      label="Executions"
      load=${load}
      rowKey=${(e: Execution) => e.metadata.id}
      sortFields=${["createdAt"]}
      searchable=${false}
      deps=${[job, version]}
      columns=${[
        {
          label: "Execution",
          render: (e: Execution) =>
            html`<button class="linkish" aria-expanded=${open === e.metadata.id} onClick=${() => setOpen(open === e.metadata.id ? undefined : e.metadata.id)}>
              ${e.metadata.id}
            </button>`,
        },
        { label: "Status", render: (e: Execution) => html`<${Status} value=${e.status} />` },
        {
          label: "Tasks",
          render: (e: Execution) =>
            Object.entries(e.stats ?? {})
              .filter(([, n]) => n)
              .map(([k, n]) => `${n} ${k}`)
              .join(", "),
        },
        { label: "Created", sort: "createdAt", render: (e: Execution) => html`<${Time} iso=${e.metadata.createdAt} />` },
        {
          label: "",
          render: (e: Execution) =>
            TERMINAL.has(e.status)
              ? null
              : html`<button
                  class="danger small"
                  onClick=${() => void cancel.run(() => api.json("DELETE", `${base}/${encodeURIComponent(e.metadata.id)}`, { workspace }))}
                >
                  Cancel
                </button>`,
        },
      ]}
    />
    ${open ? html`<${ExecutionTasks} job=${job} id=${open} />` : null}
  <//>`;
}

function ExecutionTasks({ job, id }: { job: string; id: string }) {
  const { api, workspace } = useApp();
  const polled = usePoll(() => api.get<Page<Task>>(`/v0/jobs/${encodeURIComponent(job)}/executions/${encodeURIComponent(id)}/tasks`, { workspace }), [job, id]);
  return html`<div class="subpanel">
    <h3>Tasks of ${id}</h3>
    <${ErrorBox} error=${polled.error} />
    <ol class="tasks">
      ${polled.data?.data.map(
        (t) =>
          html`<li>
            <${Status} value=${t.status} /> <code>${t.metadata.name}</code>
            <span class="muted"> started <${Time} iso=${t.metadata.startedAt} />, completed <${Time} iso=${t.metadata.completedAt} /></span>
            ${t.conditions?.map((c) => html` <span class="warn-text">${c.reason}: ${c.message}</span>`)}
          </li>`,
      )}
    </ol>
  </div>`;
}
