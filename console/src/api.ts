/**
 * The console's only way to the simulator: its public HTTP API, exactly as any
 * client uses it (control plane under /v0, each sandbox's agent under its
 * sandbox URL /sbx/{workspace}/{sandbox}). The credential lives in
 * sessionStorage (this tab only, gone with it) and travels in the
 * Authorization header, never in a URL.
 */

export const API_VERSION = "2026-04-28";
const STORAGE_KEY = "sandbox-sim-console.credential";

export type Credential = { kind: "apiKey"; apiKey: string } | { kind: "client"; clientId: string; clientSecret: string };

/** An error as the API gave it: HTTP status, its code and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
  /** "403 forbidden: the credential does not belong to workspace "x"" */
  describe(): string {
    return `${this.status} ${this.code}: ${this.message}`;
  }
}

/** The simulator answers {error, code, message}, an agent {error}, OAuth {error, error_description}. */
export function errorFrom(status: number, text: string): ApiError {
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown; error_description?: unknown };
    const code =
      typeof body.error === "string" && (typeof body.message === "string" || typeof body.error_description === "string") ? body.error : String(status);
    const message =
      typeof body.message === "string"
        ? body.message
        : typeof body.error_description === "string"
          ? body.error_description
          : typeof body.error === "string"
            ? body.error
            : text;
    return new ApiError(status, code, message);
  } catch {
    return new ApiError(status, String(status), text || "(empty reply)");
  }
}

export function loadCredential(): Credential | undefined {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as Credential) : undefined;
  } catch {
    return undefined;
  }
}

export interface RequestOptions {
  workspace?: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** Raw body (file bytes); sent as application/octet-stream. */
  raw?: Blob;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export class Api {
  #token?: { value: string; refreshAt: number };

  constructor(readonly credential: Credential) {}

  remember(): void {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify(this.credential));
  }

  static forget(): void {
    sessionStorage.removeItem(STORAGE_KEY);
  }

  /** The bearer value: the API key, or an access token from client_credentials, renewed before it expires. */
  async bearer(): Promise<string> {
    if (this.credential.kind === "apiKey") return this.credential.apiKey;
    if (this.#token && Date.now() < this.#token.refreshAt) return this.#token.value;
    const res = await fetch("/v0/oauth/token", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Basic ${btoa(`${this.credential.clientId}:${this.credential.clientSecret}`)}` },
      body: JSON.stringify({ grant_type: "client_credentials" }),
    });
    const text = await res.text();
    if (!res.ok) throw errorFrom(res.status, text);
    const body = JSON.parse(text) as { access_token: string; expires_in: number };
    this.#token = { value: body.access_token, refreshAt: Date.now() + Math.max(10, body.expires_in - 60) * 1000 };
    return body.access_token;
  }

  async headers(options: RequestOptions = {}): Promise<Record<string, string>> {
    const headers: Record<string, string> = { Authorization: `Bearer ${await this.bearer()}`, "Blaxel-Version": API_VERSION, ...options.headers };
    if (options.workspace) headers["X-Blaxel-Workspace"] = options.workspace;
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    if (options.raw) headers["Content-Type"] = "application/octet-stream";
    return headers;
  }

  /** A fetch through the API; throws ApiError on a non-2xx reply. */
  async fetch(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const url = withQuery(path, options.query);
    const send = async () =>
      fetch(url, {
        method,
        headers: await this.headers(options),
        body: options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
        signal: options.signal,
      });
    let res = await send();
    // An access token runs on the simulator's clock, which test hooks move: on a 401 get a new one, once.
    if (res.status === 401 && this.credential.kind === "client" && this.#token) {
      this.#token = undefined;
      res = await send();
    }
    if (!res.ok) throw errorFrom(res.status, await res.text());
    return res;
  }

  async json<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const res = await this.fetch(method, path, options);
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  get<T = unknown>(path: string, options?: RequestOptions): Promise<T> {
    return this.json<T>("GET", path, options);
  }
}

export function withQuery(path: string, query: RequestOptions["query"]): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== "") params.set(k, String(v));
  const text = params.toString();
  return text ? `${path}${path.includes("?") ? "&" : "?"}${text}` : path;
}

/** A sandbox's URL on this origin (the simulator's sandbox proxy): /sbx/{workspace}/{sandbox}. */
export function sandboxBase(workspace: string, sandbox: string): string {
  return `/sbx/${encodeURIComponent(workspace)}/${encodeURIComponent(sandbox)}`;
}

/** A sandbox path as the agent's routes take it: each segment encoded, slashes kept. */
export function encodePath(path: string): string {
  return path.split("/").filter(Boolean).map(encodeURIComponent).join("/");
}

/** A page of a list: {data, meta} from 2026-04-28; a few lists are always bare arrays. */
export interface Page<T> {
  data: T[];
  meta: { hasMore: boolean; nextCursor: string; total: number };
}

export function asPage<T>(value: T[] | Page<T>): Page<T> {
  return Array.isArray(value) ? { data: value, meta: { hasMore: false, nextCursor: "", total: value.length } } : value;
}
