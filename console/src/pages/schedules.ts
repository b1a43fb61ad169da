import { useState } from "preact/hooks";
import type { Page } from "../api.js";
import { ErrorBox, formatDuration, formValues, html, Section, Status, Time, useAction, useApp, usePoll } from "../ui.js";

/**
 * A sandbox's schedules: listed, created and deleted through the control plane
 * (/v0/sandboxes/{name}/schedules), executions as a timeline from
 * /v0/sandboxes/{name}/schedule-executions. "Run now" and an execution's
 * output go to the agent through the sandbox URL, as the README says: the
 * control plane has neither.
 */
interface Schedule {
  id: string;
  type: string;
  value: string;
  timezone?: string;
  status?: string;
  nextRunAt?: string | null;
  lastRunAt?: string | null;
  input: { command: string };
}

interface Execution {
  id: string;
  scheduleId: string;
  createdAt: string;
  executedAt?: string;
  completedAt?: string | null;
  status: string;
  runStatus?: string;
  exitCode?: number | null;
  error?: string;
  processName?: string;
  trigger?: string;
}

export function SchedulesTab({ sandbox, base }: { sandbox: string; base: string }) {
  const { api, workspace } = useApp();
  const path = `/v0/sandboxes/${encodeURIComponent(sandbox)}/schedules`;
  const schedules = usePoll(() => api.get<Page<Schedule>>(path, { workspace, query: { limit: 100 } }), [workspace, sandbox]);
  const executions = usePoll(
    () => api.get<Page<Execution>>(`/v0/sandboxes/${encodeURIComponent(sandbox)}/schedule-executions`, { workspace, query: { limit: 100 } }),
    [workspace, sandbox],
  );
  const action = useAction();
  const create = (event: Event) => {
    const v = formValues(event);
    const form = event.currentTarget as HTMLFormElement;
    void action.run(async () => {
      const body: Record<string, unknown> = { type: v.type, value: v.value, input: { command: v.command } };
      await api.json("POST", path, { workspace, body });
      form.reset();
      schedules.reload();
    });
  };
  const runNow = (s: Schedule) =>
    void action.run(async () => {
      await api.json("POST", `${base}/schedules/${encodeURIComponent(s.id)}/run`, { workspace });
      executions.reload();
    });
  const remove = (s: Schedule) => {
    if (!confirm(`Delete schedule ${s.id} and its history?`)) return;
    void action.run(async () => {
      await api.json("DELETE", `${path}/${encodeURIComponent(s.id)}`, { workspace });
      schedules.reload();
      executions.reload();
    });
  };
  const byId = new Map<string, Execution[]>();
  for (const e of executions.data?.data ?? []) byId.set(e.scheduleId, [...(byId.get(e.scheduleId) ?? []), e]);
  // Executions of schedules no longer listed (fired one-offs are retired) get a section of their own.
  const listed = new Set((schedules.data?.data ?? []).map((s) => s.id));
  return html`<div>
    <${Section} title="New schedule">
      <form class="inline-form" onSubmit=${create}>
        <label
          >Type
          <select name="type">
            <option value="sleep">sleep (once, after)</option>
            <option value="at">at (once, when)</option>
            <option value="cron">cron</option>
          </select></label
        >
        <label>When <input name="value" required placeholder="30s · tomorrow at 9am · */5 * * * *" /></label>
        <label class="grow">Command <input name="command" required placeholder="echo hello" spellcheck="false" /></label>
        <button type="submit" disabled=${action.busy}>Create schedule</button>
      </form>
      <${ErrorBox} error=${action.error} />
    <//>
    <${ErrorBox} error=${schedules.error} /><${ErrorBox} error=${executions.error} />
    ${schedules.data?.data.length === 0 ? html`<p class="muted">No schedules.</p>` : null}
    ${schedules.data?.data.map(
      (s) =>
        html`<${Section}
          title=${`${s.type} ${s.value}`}
          actions=${html` <button class="small" onClick=${() => runNow(s)}>Run now</button>
            <button class="small danger" onClick=${() => remove(s)}>Delete</button>`}
        >
          <p class="small">
            <${Status} value=${s.status} /> <code>${s.input.command}</code>
            <span class="muted">· id ${s.id} · ${s.timezone ?? "UTC"} · next <${Time} iso=${s.nextRunAt} /> · last <${Time} iso=${s.lastRunAt} /></span>
          </p>
          <${Timeline} base=${base} executions=${byId.get(s.id) ?? []} />
        <//>`,
    )}
    ${[...byId]
      .filter(([id]) => !listed.has(id))
      .map(
        ([id, runs]) =>
          html`<${Section} title=${`fired once · ${id}`}>
            <p class="small muted">A one-off schedule is removed once it has fired, as on the platform; its executions stay.</p>
            <${Timeline} base=${base} executions=${runs} />
          <//>`,
      )}
  </div>`;
}

/** Newest first: when it ran, what the process did (status, exit code, duration), its output on demand. */
function Timeline({ base, executions }: { base: string; executions: Execution[] }) {
  const { api, workspace } = useApp();
  const [output, setOutput] = useState<Record<string, string>>({});
  const action = useAction();
  const show = (e: Execution) => {
    if (!e.processName) return;
    if (output[e.id] !== undefined) return setOutput(({ [e.id]: _, ...rest }) => rest);
    void action.run(async () => {
      const logs = await api.get<{ logs: string }>(`${base}/process/${encodeURIComponent(e.processName!)}/logs`, { workspace });
      setOutput((o) => ({ ...o, [e.id]: logs.logs }));
    });
  };
  if (!executions.length) return html`<p class="muted small">No execution yet.</p>`;
  return html`<div>
    <${ErrorBox} error=${action.error} />
    <ol class="timeline" aria-label="Executions">
      ${executions.map((e) => {
        const ran = e.completedAt && e.executedAt ? formatDuration(Date.parse(e.completedAt) - Date.parse(e.executedAt)) : e.executedAt ? "running" : "—";
        return html`<li class=${`tl-${e.runStatus ?? e.status}`} data-execution=${e.id}>
          <span class="tl-dot" aria-hidden="true"></span>
          <div>
            <${Time} iso=${e.executedAt ?? e.createdAt} /> <${Status} value=${e.runStatus ?? e.status} />
            <span class="small">exit ${e.exitCode ?? "—"} · ${ran} · ${e.trigger}</span>
            ${e.error ? html` <span class="warn-text small">${e.error}</span>` : null}
            ${e.processName ? html` <button class="small linkish" aria-expanded=${output[e.id] !== undefined} onClick=${() => show(e)}>output</button>` : null}
            ${output[e.id] !== undefined ? html`<pre class="logs short">${output[e.id] || "(no output)"}</pre>` : null}
          </div>
        </li>`;
      })}
    </ol>
  </div>`;
}
