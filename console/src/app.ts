import { useEffect, useState } from "preact/hooks";
import { Api, loadCredential, type Credential } from "./api.js";
import { KINDS, kindById } from "./kinds.js";
import { ServiceAccountsPage } from "./pages/access.js";
import { TestHooksPage } from "./pages/hooks.js";
import { MetricsPage } from "./pages/metrics.js";
import { ResourceDetailPage, ResourceListPage, WorkspacesPage } from "./pages/resources.js";
import { SandboxPage } from "./pages/sandbox.js";
import { AppContext, ErrorBox, html, link, POLL_MS, toApiError, usePoll, type AppState } from "./ui.js";
import type { ApiError } from "./api.js";

/**
 * The shell: sign-in, then a header (workspace picker, sign out), a side
 * navigation and the page the location hash names. Routes live in the hash
 * (#/w/{workspace}/{kind}/{name}/{tab}), so they never reach the server and
 * never carry a credential.
 */
interface Session {
  api: Api;
  workspaces: string[];
  testHooks: boolean;
}

function useHash(): string[] {
  const read = () =>
    location.hash
      .replace(/^#\/?/, "")
      .split("/")
      .filter(Boolean)
      .map((s) => {
        try {
          return decodeURIComponent(s);
        } catch {
          return s;
        }
      });
  const [parts, setParts] = useState(read);
  useEffect(() => {
    const on = () => setParts(read());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return parts;
}

/** Checks a credential the way every page will use it: GET /v0/workspaces lists what it may see. */
async function openSession(credential: Credential): Promise<Session> {
  const api = new Api(credential);
  const list = await api.get<{ name: string }[]>("/v0/workspaces");
  const health = await fetch("/health")
    .then((r) => r.json() as Promise<{ testHooks?: boolean }>)
    .catch(() => ({ testHooks: false }));
  return { api, workspaces: list.map((w) => w.name), testHooks: health.testHooks === true };
}

export function App() {
  const [session, setSession] = useState<Session | undefined>();
  const [restoring, setRestoring] = useState(() => loadCredential() !== undefined);
  const [error, setError] = useState<ApiError | undefined>();
  useEffect(() => {
    const saved = loadCredential();
    if (!saved) return;
    openSession(saved)
      .then(setSession, (err) => {
        Api.forget();
        setError(toApiError(err));
      })
      .finally(() => setRestoring(false));
  }, []);
  const signIn = async (credential: Credential) => {
    setError(undefined);
    try {
      const s = await openSession(credential);
      s.api.remember();
      setSession(s);
    } catch (err) {
      setError(toApiError(err));
    }
  };
  const signOut = () => {
    Api.forget();
    setSession(undefined);
    location.hash = "";
  };
  if (restoring) return html`<main class="signin"><p class="muted">Signing in…</p></main>`;
  if (!session) return html`<${SignIn} onSignIn=${signIn} error=${error} />`;
  return html`<${Shell} session=${session} onSignOut=${signOut} />`;
}

function SignIn({ onSignIn, error }: { onSignIn: (c: Credential) => Promise<void>; error?: ApiError }) {
  const [kind, setKind] = useState<"apiKey" | "client">("apiKey");
  const [busy, setBusy] = useState(false);
  const submit = (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const get = (k: string) => String(form.get(k) ?? "").trim();
    setBusy(true);
    void onSignIn(kind === "apiKey" ? { kind, apiKey: get("apiKey") } : { kind, clientId: get("clientId"), clientSecret: get("clientSecret") }).finally(() =>
      setBusy(false),
    );
  };
  return html`<main class="signin">
    <form class="signin-card" onSubmit=${submit} aria-labelledby="signin-title">
      <h1 id="signin-title">sandbox-sim console</h1>
      <p class="muted">Sign in with a credential of this simulator. It is kept in this tab's session storage only, and sent in the Authorization header.</p>
      <fieldset class="radios">
        <legend>Credential</legend>
        <label class="check"><input type="radio" name="kind" checked=${kind === "apiKey"} onChange=${() => setKind("apiKey")} /> API key</label>
        <label class="check"
          ><input type="radio" name="kind" checked=${kind === "client"} onChange=${() => setKind("client")} /> Service account (client credentials)</label
        >
      </fieldset>
      ${
        kind === "apiKey"
          ? html`<label class="block"
              >API key <input name="apiKey" type="password" autocomplete="off" required placeholder="BL_API_KEY printed at start-up"
            /></label>`
          : html` <label class="block">Client ID <input name="clientId" autocomplete="off" required /></label>
              <label class="block">Client secret <input name="clientSecret" type="password" autocomplete="off" required /></label>`
      }
      <button type="submit" disabled=${busy}>${busy ? "Signing in…" : "Sign in"}</button>
      <${ErrorBox} error=${error} />
    </form>
  </main>`;
}

const ACCOUNT_PAGES = new Set(["workspaces", "metrics", "hooks"]);

function Shell({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const parts = useHash();
  const [remembered, setRemembered] = useState(session.workspaces[0] ?? "");
  const inWorkspace = parts[0] === "w" && parts[1] !== undefined;
  const workspace = inWorkspace ? parts[1]! : remembered;
  useEffect(() => {
    if (inWorkspace && parts[1] !== remembered) setRemembered(parts[1]!);
  }, [parts[1]]);
  const section = inWorkspace ? (parts[2] ?? "sandboxes") : ACCOUNT_PAGES.has(parts[0] ?? "") ? parts[0]! : "workspaces";
  const state: AppState = { api: session.api, workspace, workspaces: session.workspaces, testHooks: session.testHooks };
  const pick = (event: Event) => {
    const next = (event.currentTarget as HTMLSelectElement).value;
    location.hash = link("w", next, inWorkspace ? section : "sandboxes");
  };
  const who = session.api.credential.kind === "apiKey" ? "API key" : `client ${session.api.credential.clientId}`;
  const navLink = (href: string, label: string, active: boolean) => html`<li><a href=${href} aria-current=${active ? "page" : undefined}>${label}</a></li>`;
  return html`<${AppContext.Provider} value=${state}>
    <a
      class="skip"
      href="#main"
      onClick=${(e: Event) => {
        e.preventDefault();
        document.getElementById("main")?.focus();
      }}
      >Skip to content</a
    >
    <header class="top">
      <a class="brand" href="#/workspaces">sandbox-sim</a>
      <label class="ws-pick"
        >Workspace
        <select value=${workspace} onChange=${pick}>
          ${session.workspaces.map((w) => html`<option value=${w}>${w}</option>`)}
          ${workspace && !session.workspaces.includes(workspace) ? html`<option value=${workspace}>${workspace} (not yours)</option>` : null}
        </select>
      </label>
      <span class="who muted small">${who}${session.testHooks ? " · test hooks on" : ""}</span>
      <button class="small" onClick=${onSignOut}>Sign out</button>
    </header>
    <div class="layout">
      <nav class="side" aria-label="Main">
        <h2 class="nav-title">Workspace</h2>
        <ul>
          ${KINDS.map((k) => navLink(link("w", workspace, k.id), k.label, inWorkspace && section === k.id))}
          ${navLink(link("w", workspace, "service_accounts"), "Service accounts", inWorkspace && section === "service_accounts")}
        </ul>
        <h2 class="nav-title">Account</h2>
        <ul>
          ${navLink("#/workspaces", "Workspaces", !inWorkspace && section === "workspaces")}
          ${navLink("#/metrics", "Metrics", !inWorkspace && section === "metrics")}
          ${session.testHooks ? navLink("#/hooks", "Test hooks", !inWorkspace && section === "hooks") : null}
        </ul>
      </nav>
      <main id="main" tabindex="-1"><${ImageBuild} />${route(inWorkspace, section, parts)}</main>
    </div>
  <//>`;
}

interface DefaultImage {
  image: string;
  state: "building" | "ready" | "failed";
  phase?: string;
  step?: string;
  seconds: number;
  error?: string;
}

/** The image the simulator builds at start (GET /health defaultImage): while it builds, sandboxes of it wait. */
function ImageBuild() {
  const [last, setLast] = useState<DefaultImage | undefined>();
  const polled = usePoll(
    () => fetch("/health").then((r) => r.json() as Promise<{ defaultImage?: DefaultImage }>),
    [],
    last && last.state !== "building" ? 0 : POLL_MS,
  );
  const image = polled.data?.defaultImage;
  useEffect(() => setLast(image), [image?.state]);
  if (!image || image.state === "ready") return null;
  if (image.state === "failed")
    return html`<div class="error" role="alert"><strong>${image.image}</strong> could not be built: ${image.error}. Creates of it try again.</div>`;
  return html`<div class="image-build" role="status">
    <strong>Building ${image.image}</strong> (${Math.round(image.seconds)} s): ${image.phase ?? "starting"}${image.step ? ` — ${image.step}` : ""}. Sandboxes
    created now wait for it; once built, it is kept for every later start.
  </div>`;
}

function route(inWorkspace: boolean, section: string, parts: string[]) {
  if (!inWorkspace) {
    if (section === "metrics") return html`<${MetricsPage} />`;
    if (section === "hooks") return html`<${TestHooksPage} />`;
    return html`<${WorkspacesPage} />`;
  }
  if (section === "service_accounts") return html`<${ServiceAccountsPage} />`;
  const kind = kindById(section);
  if (!kind)
    return html`<div class="page">
      <h1>Not found</h1>
      <p>No section "${section}".</p>
    </div>`;
  const name = parts[3];
  if (!name) return html`<${ResourceListPage} key=${kind.id} kind=${kind} />`;
  if (kind.id === "sandboxes") return html`<${SandboxPage} key=${name} name=${name} tab=${parts[4]} />`;
  return html`<${ResourceDetailPage} key=${`${kind.id}/${name}`} kind=${kind} name=${name} />`;
}
