import { createContext, type ComponentChildren } from "preact";
import { useCallback, useContext, useEffect, useRef, useState } from "preact/hooks";
import { html } from "htm/preact";
import { ApiError, type Api } from "./api.js";

/** Shared pieces of every page: markup helper, app context, polling, errors, statuses, times. */
export { html };

export interface AppState {
  api: Api;
  workspace: string;
  workspaces: string[];
  /** The simulator runs with --test-hooks (from GET /health). */
  testHooks: boolean;
}

export const AppContext = createContext<AppState>(undefined as unknown as AppState);
export const useApp = () => useContext(AppContext);

export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new ApiError(0, "network", message);
}

/** How often pages refresh what they show (the console polls the API, as any client would). */
export const POLL_MS = 2000;

export interface Polled<T> {
  data?: T;
  error?: ApiError;
  loading: boolean;
  reload(): void;
}

/**
 * Loads now, then again every `intervalMs` while the tab is visible; a failed
 * refresh keeps the last data and shows the error until a refresh succeeds.
 */
export function usePoll<T>(load: () => Promise<T>, deps: unknown[], intervalMs: number = POLL_MS): Polled<T> {
  const [state, setState] = useState<{ data?: T; error?: ApiError; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    setState((s) => ({ ...s, loading: true }));
    const run = async () => {
      if (document.visibilityState !== "hidden" || timer === undefined) {
        try {
          const data = await loadRef.current();
          if (alive) setState({ data, loading: false });
        } catch (err) {
          if (alive) setState((s) => ({ data: s.data, error: toApiError(err), loading: false }));
        }
      }
      if (alive && intervalMs > 0) timer = setTimeout(run, intervalMs);
    };
    void run();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [...deps, tick, intervalMs]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

/** Runs user actions (buttons, forms): busy flag, and the API's error kept for display. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const run = useCallback(async <T>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await action();
    } catch (err) {
      setError(toApiError(err));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(undefined) };
}

export function ErrorBox({ error }: { error?: ApiError }) {
  if (!error) return null;
  return html`<div class="error" role="alert"><strong>${error.status || "error"} ${error.code}</strong> ${error.message}</div>`;
}

const STATUS_CLASS: Record<string, string> = {
  DEPLOYED: "ok",
  RUNNING: "ok",
  succeeded: "ok",
  completed: "ok",
  active: "ok",
  ready: "ok",
  FAILED: "bad",
  failed: "bad",
  killed: "bad",
  TERMINATED: "off",
  DELETING: "warn",
  stopped: "off",
  skipped: "warn",
  cancelled: "off",
  CANCELLED: "off",
  ARCHIVED: "off",
  DEACTIVATED: "off",
  done: "off",
  STANDBY: "off",
};

export function Status({ value }: { value?: string }) {
  if (!value) return html`<span class="status off">—</span>`;
  return html`<span class=${`status ${STATUS_CLASS[value] ?? "busy"}`}>${value}</span>`;
}

/** Re-renders every second (countdowns, ages). */
export function useNow(periodMs = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const id = setInterval(() => setNow(Date.now()), periodMs);
    return () => clearInterval(id);
  }, [periodMs]);
  return now;
}

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours}h ${m % 60}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

/** `expiresIn` (seconds at `fetchedAt`), counted down live. */
export function Countdown({ seconds, fetchedAt }: { seconds?: number; fetchedAt: number }) {
  const now = useNow();
  if (typeof seconds !== "number") return html`<span class="muted">—</span>`;
  const left = seconds * 1000 - (now - fetchedAt);
  return html`<span class=${left < 5 * 60_000 ? "countdown soon" : "countdown"} title="expiresIn"
    >${left <= 0 ? "expiring" : `in ${formatDuration(left)}`}</span
  >`;
}

export function Time({ iso }: { iso?: string | null }) {
  const now = useNow(5000);
  if (!iso) return html`<span class="muted">—</span>`;
  const at = Date.parse(iso);
  const ago = now - at;
  const text = Number.isNaN(at) ? iso : ago >= 0 ? `${formatDuration(ago)} ago` : `in ${formatDuration(-ago)}`;
  return html`<time datetime=${iso} title=${iso}>${text}</time>`;
}

export function formatBytes(n?: number): string {
  if (typeof n !== "number") return "—";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export interface EventItem {
  type?: string;
  status?: string;
  message?: string;
  time?: string;
}

export function Events({ events }: { events?: EventItem[] }) {
  if (!events?.length) return html`<p class="muted">No events.</p>`;
  return html`<ol class="events" reversed>
    ${[...events].reverse().map((e) => html`<li><${Time} iso=${e.time} /> <${Status} value=${e.status} /> <span class="muted">${e.type}</span> ${e.message}</li>`)}
  </ol>`;
}

export function Section({ title, children, actions }: { title: string; children?: ComponentChildren; actions?: ComponentChildren }) {
  return html`<section class="panel">
    <header class="panel-head">
      <h2>${title}</h2>
      ${actions ? html`<div class="actions">${actions}</div>` : null}
    </header>
    ${children}
  </section>`;
}

export function Json({ value }: { value: unknown }) {
  return html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;
}

/** Read a form's named fields. */
export function formValues(event: Event): Record<string, string> {
  event.preventDefault();
  const form = event.currentTarget as HTMLFormElement;
  return Object.fromEntries([...new FormData(form).entries()].map(([k, v]) => [k, typeof v === "string" ? v.trim() : ""]));
}

/** A "hash" link inside the console. */
export const link = (...parts: string[]) => `#/${parts.map(encodeURIComponent).join("/")}`;

/** JSON typed into a text area; a syntax error becomes the message shown. */
export function parseJsonInput(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`not JSON: ${(err as Error).message}`);
  }
}
