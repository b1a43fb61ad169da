import { useEffect, useState } from "preact/hooks";
import { ErrorBox, formValues, html, parseJsonInput, Section, useAction, useApp, usePoll } from "../ui.js";

/** The simulator's test hooks (/_sim/*, only with --test-hooks): clock, status transitions, fault rules. */

interface Clock {
  now: string;
  frozen: boolean;
  expired?: unknown[];
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function TestHooksPage() {
  const { testHooks } = useApp();
  if (!testHooks)
    return html`<div class="page">
      <h1>Test hooks</h1>
      <p>This simulator runs without <code>--test-hooks</code>: the clock, transitions and faults cannot be driven.</p>
    </div>`;
  return html`<div class="page">
    <h1>Test hooks</h1>
    <p class="muted">Routes under <code>/_sim</code>, enabled by <code>--test-hooks</code>. They change the whole simulator, for every user.</p>
    <${ClockPanel} />
    <${TransitionsPanel} />
    <${FaultsPanel} />
  </div>`;
}

function ClockPanel() {
  const { api } = useApp();
  const clock = usePoll(() => api.get<Clock>("/_sim/clock"), [], 1000);
  const action = useAction();
  const [expired, setExpired] = useState<unknown[]>([]);
  const post = (body: unknown) =>
    void action.run(async () => {
      const reply = await api.json<Clock>("POST", "/_sim/clock", { body });
      setExpired(reply.expired ?? []);
      clock.reload();
    });
  const advance = (event: Event) => {
    const v = formValues(event);
    post({ advanceMs: Math.round(Number(v.amount) * (UNIT_MS[v.unit ?? "s"] ?? 1000)) });
  };
  const set = (event: Event) => {
    const v = formValues(event);
    if (v.at) post({ set: new Date(`${v.at}Z`).toISOString() });
  };
  return html`<${Section} title="Clock">
    <p class="clock">
      <strong data-clock>${clock.data?.now ?? "…"}</strong>
      ${clock.data?.frozen ? html`<span class="status warn">frozen</span>` : html`<span class="status ok">running</span>`}
    </p>
    <div class="actions">
      <button onClick=${() => post({ freeze: !clock.data?.frozen })} disabled=${action.busy}>${clock.data?.frozen ? "Unfreeze" : "Freeze"}</button>
    </div>
    <form class="inline-form" onSubmit=${advance}>
      <label>Advance by <input name="amount" type="number" min="0" step="any" required value="60" /></label>
      <label
        >Unit
        <select name="unit">
          <option value="s">seconds</option>
          <option value="m">minutes</option>
          <option value="h">hours</option>
          <option value="d">days</option>
        </select></label
      >
      <button type="submit" disabled=${action.busy}>Advance</button>
    </form>
    <form class="inline-form" onSubmit=${set}>
      <label>Set to (UTC) <input name="at" type="datetime-local" step="1" required /></label>
      <button type="submit" disabled=${action.busy}>Set</button>
    </form>
    ${expired.length ? html`<p class="small">Expired by this move: <code>${JSON.stringify(expired)}</code></p>` : null}
    <${ErrorBox} error=${clock.error} /><${ErrorBox} error=${action.error} />
  <//>`;
}

function TransitionsPanel() {
  const { api, workspace } = useApp();
  const mode = usePoll(() => api.get<{ mode: string }>("/_sim/transitions"), [], 5000);
  const action = useAction();
  const [result, setResult] = useState<unknown>();
  // The radio shows the choice at once; a refused change falls back to what the simulator says.
  const [chosen, setChosen] = useState<string | undefined>();
  const setMode = (value: string) => {
    setChosen(value);
    void action
      .run(async () => {
        await api.json("POST", "/_sim/transitions", { body: { mode: value } });
        mode.reload();
        return true;
      })
      .then((done) => done || setChosen(undefined));
  };
  useEffect(() => {
    if (chosen !== undefined && mode.data?.mode === chosen) setChosen(undefined);
  }, [mode.data?.mode]);
  const current = chosen ?? mode.data?.mode;
  const step = (event: Event) => {
    const v = formValues(event);
    void action.run(async () => {
      setResult(
        await api.json("POST", "/_sim/transitions/step", {
          body: {
            workspace: v.workspace || workspace,
            kind: v.kind,
            name: v.name,
            ...(v.parent ? { parent: v.parent } : {}),
            ...(v.status ? { status: v.status } : {}),
          },
        }),
      );
    });
  };
  return html`<${Section} title="Transitions">
    <fieldset class="radios">
      <legend>Mode</legend>
      ${["timed", "immediate", "manual"].map((m) => html`<label class="check"><input type="radio" name="mode" value=${m} checked=${current === m} onChange=${() => setMode(m)} /> ${m}</label>`)}
    </fieldset>
    <form class="inline-form" onSubmit=${step}>
      <label
        >Kind
        <select name="kind">
          ${["sandbox", "agent", "function", "job", "model", "application", "vpc", "egress-gateway", "egress-ip"].map((k) => html`<option>${k}</option>`)}
        </select></label
      >
      <label>Name <input name="name" required /></label>
      <label>Workspace <input name="workspace" placeholder=${workspace} /></label>
      <label>Parent <input name="parent" placeholder="vpc or vpc/gateway" /></label>
      <label
        >Force status
        <select name="status">
          <option value="">(next planned move)</option>
          ${["UPLOADING", "BUILDING", "DEPLOYING", "DEPLOYED", "FAILED", "DEACTIVATING", "DEACTIVATED", "DELETING", "TERMINATED", "ARCHIVED"].map((s) => html`<option>${s}</option>`)}
        </select></label
      >
      <button type="submit" disabled=${action.busy}>Step</button>
    </form>
    ${result ? html`<p class="small">Step: <code>${JSON.stringify(result)}</code></p>` : null}
    <${ErrorBox} error=${mode.error} /><${ErrorBox} error=${action.error} />
  <//>`;
}

function FaultsPanel() {
  const { api } = useApp();
  const faults = usePoll(() => api.get<{ rules: unknown[] }>("/_sim/faults"), [], 3000);
  const action = useAction();
  const [text, setText] = useState('[{"method": "POST", "path": "/v0/sandboxes", "status": 500, "times": 1}]');
  const apply = (event: Event) => {
    event.preventDefault();
    void action.run(async () => {
      await api.json("PUT", "/_sim/faults", { body: { rules: parseJsonInput(text) } });
      faults.reload();
    });
  };
  const clear = () =>
    void action.run(async () => {
      await api.json("DELETE", "/_sim/faults");
      faults.reload();
    });
  return html`<${Section} title="Fault rules">
    <p class="small muted">Requests matching a rule fail with its status (<code>times</code> counts down; a path may end in <code>*</code>).</p>
    <h3 class="small">Active</h3>
    <pre class="json" data-faults>${JSON.stringify(faults.data?.rules ?? [], null, 2)}</pre>
    <form onSubmit=${apply}>
      <label class="block"
        >Rules (replace all)
        <textarea rows="4" spellcheck="false" value=${text} onInput=${(e: Event) => setText((e.currentTarget as HTMLTextAreaElement).value)}></textarea>
      </label>
      <div class="actions">
        <button type="submit" disabled=${action.busy}>Apply rules</button>
        <button type="button" class="danger" onClick=${clear} disabled=${action.busy}>Clear all</button>
      </div>
    </form>
    <${ErrorBox} error=${faults.error} /><${ErrorBox} error=${action.error} />
  <//>`;
}
