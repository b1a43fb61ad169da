import { useEffect, useRef, useState } from "preact/hooks";
import type { Api } from "../api.js";
import { ErrorBox, formatDuration, formValues, html, Section, Status, Time, toApiError, useAction, useApp, usePoll } from "../ui.js";

/** A sandbox's processes through its agent: start a command, follow its output live, stop, kill. */

interface Proc {
  pid: string;
  name: string;
  command: string;
  status: string;
  exitCode: number;
  error?: string | null;
  startedAt?: string;
  completedAt?: string | null;
  workingDir?: string;
}

interface LogLine {
  stream: "stdout" | "stderr";
  text: string;
}

/**
 * Follows GET /process/{id}/logs/stream: text lines prefixed `stdout:` or
 * `stderr:` (the reference daemon's format), "[keepalive]" every 30 s; the
 * stream ends with the process.
 */
async function followLogs(api: Api, workspace: string, base: string, id: string, signal: AbortSignal, onLine: (line: LogLine) => void): Promise<void> {
  const res = await api.fetch("GET", `${base}/process/${encodeURIComponent(id)}/logs/stream`, { workspace, signal });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += value;
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (line === "[keepalive]") continue;
      if (line.startsWith("stdout:")) onLine({ stream: "stdout", text: line.slice(7) });
      else if (line.startsWith("stderr:")) onLine({ stream: "stderr", text: line.slice(7) });
      else onLine({ stream: "stdout", text: line });
    }
  }
  if (pending) onLine({ stream: "stdout", text: pending });
}

export function ProcessesTab({ base }: { base: string }) {
  const { api, workspace } = useApp();
  const [selected, setSelected] = useState<string | undefined>();
  const list = usePoll(() => api.get<Proc[]>(`${base}/process`, { workspace }), [base]);
  const action = useAction();
  const start = (event: Event) => {
    const v = formValues(event);
    const form = event.currentTarget as HTMLFormElement;
    void action.run(async () => {
      const body: Record<string, unknown> = { command: v.command };
      if (v.name) body.name = v.name;
      if (v.workingDir) body.workingDir = v.workingDir;
      const proc = await api.json<Proc>("POST", `${base}/process`, { workspace, body });
      setSelected(proc.pid);
      form.reset();
      list.reload();
    });
  };
  const signal = (p: Proc, how: "stop" | "kill") =>
    void action.run(async () => {
      await api.json("DELETE", `${base}/process/${encodeURIComponent(p.pid)}${how === "kill" ? "/kill" : ""}`, { workspace });
      list.reload();
    });
  const procs = [...(list.data ?? [])].sort((a, b) => String(b.startedAt).localeCompare(String(a.startedAt)));
  const current = procs.find((p) => p.pid === selected);
  return html`<div>
    <${Section} title="Start a command">
      <form class="inline-form" onSubmit=${start}>
        <label class="grow">Command <input name="command" required placeholder="for i in 1 2 3; do echo $i; sleep 1; done" spellcheck="false" /></label>
        <label>Name <input name="name" placeholder="optional" /></label>
        <label>Working dir <input name="workingDir" placeholder="/" /></label>
        <button type="submit" disabled=${action.busy}>Run</button>
      </form>
      <${ErrorBox} error=${action.error} />
    <//>
    <div class="split">
      <${Section} title="Processes">
        <${ErrorBox} error=${list.error} />
        <ul class="procs" aria-label="Processes">
          ${procs.map(
            (p) =>
              html`<li class=${p.pid === selected ? "selected" : ""} data-pid=${p.pid}>
                <button class="linkish proc-pick" aria-pressed=${p.pid === selected} onClick=${() => setSelected(p.pid)}>
                  <${Status} value=${p.status} /> <strong>${p.name}</strong> <code>${p.command}</code>
                </button>
                <span class="muted small">pid ${p.pid} · started <${Time} iso=${p.startedAt} />${p.completedAt ? ` · exit ${p.exitCode}` : ""}</span>
              </li>`,
          )}
          ${list.data?.length === 0 ? html`<li class="muted">No process yet.</li>` : null}
        </ul>
      <//>
      <${Section}
        title=${current ? `Output of ${current.name}` : "Output"}
        actions=${
          current?.status === "running"
            ? html` <button class="small" onClick=${() => signal(current, "stop")}>Stop</button>
                <button class="small danger" onClick=${() => signal(current, "kill")}>Kill</button>`
            : null
        }
      >
        ${current ? html`<${ProcessLogs} base=${base} proc=${current} onEnd=${list.reload} />` : html`<p class="muted">Pick a process, or run a command.</p>`}
      <//>
    </div>
  </div>`;
}

function ProcessLogs({ base, proc, onEnd }: { base: string; proc: Proc; onEnd: () => void }) {
  const { api, workspace } = useApp();
  const [lines, setLines] = useState<LogLine[]>([]);
  const [streaming, setStreaming] = useState(false);
  const [error, setError] = useState<ReturnType<typeof toApiError> | undefined>();
  const box = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const abort = new AbortController();
    setLines([]);
    setError(undefined);
    setStreaming(true);
    followLogs(api, workspace, base, proc.pid, abort.signal, (line) => setLines((prev) => [...prev, line]))
      .catch((err) => {
        if (!abort.signal.aborted) setError(toApiError(err));
      })
      .finally(() => {
        if (!abort.signal.aborted) {
          setStreaming(false);
          onEnd();
        }
      });
    return () => abort.abort();
  }, [base, proc.pid]);
  useEffect(() => {
    const el = box.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [lines.length]);
  const ran = proc.completedAt && proc.startedAt ? Date.parse(proc.completedAt) - Date.parse(proc.startedAt) : undefined;
  return html`<div>
    <p class="small muted" aria-live="polite">
      ${streaming ? "● streaming live" : `ended: ${proc.status}, exit code ${proc.exitCode}${ran !== undefined ? `, ran ${formatDuration(ran)}` : ""}`}${proc.error ? ` · ${proc.error}` : ""}
    </p>
    <${ErrorBox} error=${error} />
    <pre class="logs" ref=${box} tabindex="0" aria-label="Process output" data-streaming=${streaming ? "true" : "false"}>
${lines.map((l) => html`<span class=${l.stream}>${`${l.text}\n`}</span>`)}</pre>
  </div>`;
}
