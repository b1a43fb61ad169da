import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import { useEffect, useRef, useState } from "preact/hooks";
import { routeStylesThroughCssom } from "../terminal/csp-styles.js";
import { terminalToken } from "../terminal/session.js";
import { html, toApiError, useApp } from "../ui.js";

/**
 * A shell in the sandbox: xterm.js on the agent's /terminal/ws through the
 * sandbox URL, speaking the reference's JSON frames. Fits its panel and
 * follows the window; Ctrl+Shift+C / Ctrl+Shift+V copy and paste (plain
 * Ctrl+C stays an interrupt). A dropped connection (the sandbox restarting)
 * reconnects on its own once the sandbox runs again; a sandbox that is not
 * running shows why instead of a blank pane; after the shell exits, a key
 * starts a new one.
 */
const RUNNING = "DEPLOYED";
const RED = (text: string) => `\r\n\x1b[31m${text}\x1b[0m\r\n`;
const GREY = (text: string) => `\r\n\x1b[90m${text}\x1b[0m\r\n`;

type State = "connecting" | "connected" | "exited" | "waiting";

export function TerminalTab({ sandbox, base, status }: { sandbox: string; base: string; status?: string }) {
  const { api, workspace } = useApp();
  const host = useRef<HTMLDivElement>(null);
  const [state, setState] = useState<State>("connecting");
  const statusRef = useRef(status);
  statusRef.current = status;
  const wake = useRef<() => void>(() => {});

  useEffect(() => {
    routeStylesThroughCssom();
    const term = new Terminal({
      cursorBlink: true,
      fontSize: 14,
      fontFamily: "ui-monospace, Menlo, Consolas, monospace",
      scrollback: 5000,
      theme: { background: "#1a1b26", foreground: "#c0caf5", cursor: "#c0caf5", selectionBackground: "#33467c" },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host.current!);
    let ws: WebSocket | undefined;
    let closed = false;
    let exited = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let attempts = 0;
    let shownWaiting = "";
    const send = (frame: object) => {
      if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
    };
    const refit = () => {
      try {
        fit.fit();
      } catch {
        // not laid out yet
      }
    };

    async function connect(): Promise<void> {
      if (closed) return;
      retry = undefined;
      const now = statusRef.current;
      if (now && now !== RUNNING) {
        // Not running: say so once, and look again when the sandbox's status changes (wake) or in a while.
        if (shownWaiting !== now) term.write(RED(`The sandbox is ${now}: the terminal connects when it runs again.`));
        shownWaiting = now;
        setState("waiting");
        retry = setTimeout(() => void connect(), 2000);
        return;
      }
      setState("connecting");
      let token: string;
      try {
        token = await terminalToken(api, workspace, sandbox);
      } catch (err) {
        term.write(RED(`Could not open a terminal: ${toApiError(err).message}`));
        return schedule();
      }
      if (closed) return;
      refit();
      const query = new URLSearchParams({ token, cols: String(term.cols), rows: String(term.rows) });
      const socket = new WebSocket(`${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${base}/terminal/ws?${query}`);
      ws = socket;
      let opened = false;
      socket.onopen = () => {
        opened = true;
        attempts = 0;
        shownWaiting = "";
        setState("connected");
        term.focus();
      };
      socket.onmessage = (event) => {
        const frame = JSON.parse(String(event.data)) as { type: string; data?: string };
        if (frame.type === "output") term.write(frame.data ?? "");
        else if (frame.type === "error") term.write(RED(`Error: ${frame.data}`));
      };
      socket.onclose = (event) => {
        if (closed || ws !== socket) return;
        if (event.code === 1000) {
          exited = true;
          setState("exited");
          term.write(GREY(`[${event.reason || "closed"}] Press a key for a new shell.`));
          return;
        }
        term.write(RED(opened ? "Connection lost: reconnecting…" : "Could not connect: retrying…"));
        schedule();
      };
    }

    function schedule(): void {
      setState("waiting");
      attempts++;
      retry = setTimeout(() => void connect(), Math.min(10_000, 500 * 2 ** Math.min(attempts, 5)));
    }

    wake.current = () => {
      if (retry && statusRef.current === RUNNING) {
        clearTimeout(retry);
        void connect();
      }
    };

    term.onData((data) => {
      if (exited) {
        exited = false;
        term.reset();
        void connect();
        return;
      }
      send({ type: "input", data });
    });
    term.onResize(({ cols, rows }) => send({ type: "resize", cols, rows }));
    // Copy and paste with Ctrl+Shift+C/V (Cmd+C/V work as the browser's own on macOS); plain Ctrl+C is ^C for the shell.
    term.attachCustomKeyEventHandler((event) => {
      if (event.type !== "keydown" || !event.ctrlKey || !event.shiftKey) return true;
      if (event.code === "KeyC" && term.hasSelection()) {
        void navigator.clipboard?.writeText(term.getSelection());
        return false;
      }
      if (event.code === "KeyV") {
        void navigator.clipboard?.readText().then((text) => term.paste(text));
        return false;
      }
      return true;
    });
    const resized = new ResizeObserver(refit);
    resized.observe(host.current!);
    refit();
    void connect();
    return () => {
      closed = true;
      if (retry) clearTimeout(retry);
      resized.disconnect();
      ws?.close();
      term.dispose();
    };
  }, [api, workspace, sandbox, base]);

  // A sandbox that starts running again: reconnect now rather than at the next retry.
  useEffect(() => wake.current(), [status]);

  const label = {
    connecting: "Connecting…",
    connected: "Connected",
    exited: "Shell exited",
    waiting: status && status !== RUNNING ? `Waiting for the sandbox (${status})` : "Reconnecting…",
  }[state];
  return html`<div class="terminal-tab">
    <p class="small muted terminal-state" role="status" aria-live="polite" data-state=${state}>${label} · Ctrl+Shift+C / Ctrl+Shift+V copy and paste</p>
    <div class="terminal-host" ref=${host} aria-label="Terminal"></div>
  </div>`;
}
