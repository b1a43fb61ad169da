import { existsSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, type TestAgent } from "../../helpers/agent.js";
import { spawnAgent } from "../../helpers/agent-process.js";
import { openReadyTerminal, openTerminal, run, until, type TerminalClient } from "../../helpers/terminal-client.js";

const TOKEN = "terminal-token-42";
const auth = { authorization: `Bearer ${TOKEN}` };
let agent: TestAgent;
const wsUrl = (query = "") => `${agent.url}/terminal/ws${query}`;

beforeAll(async () => {
  process.env.TERMINAL_TEST_MARK = "from-the-sandbox-environment";
  agent = await startTestAgent({ token: TOKEN });
});
afterAll(async () => {
  await agent?.stop();
});

function alive(pid: number): boolean {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

async function shellPid(term: TerminalClient): Promise<number> {
  return Number((await run(term, "echo $$")).trim());
}

describe("/terminal/ws on a real PTY", () => {
  it("runs what is typed and sends its output back", async () => {
    const term = await openReadyTerminal(wsUrl(), auth);
    const from = term.output().length;
    term.input("echo hi-$RANDOM\n");
    // "hi-$RANDOM" echoed by the terminal, then the shell's "hi-<digits>"
    await term.waitFor(/hi-\d+/, { from });
    term.ws.close();
  });

  it("takes the token as ?token= (the CLI's way) and the size from cols and rows", async () => {
    const term = await openReadyTerminal(wsUrl(`?token=${TOKEN}&cols=91&rows=27`));
    expect((await run(term, "stty size")).trim()).toBe("27 91");
    term.ws.close();
  });

  it("a resize frame changes the size stty reports", async () => {
    const term = await openReadyTerminal(wsUrl(), auth);
    term.resize(132, 43);
    expect((await run(term, "stty size")).trim()).toBe("43 132");
    term.ws.close();
  });

  it("is a real terminal: tty names a /dev/pts device, TERM is xterm-256color, the sandbox's environment is there", async () => {
    const term = await openReadyTerminal(wsUrl(), auth);
    expect((await run(term, "tty")).trim()).toMatch(/^\/dev\/pts\/\d+$/);
    expect((await run(term, "echo $TERM")).trim()).toBe("xterm-256color");
    expect((await run(term, "echo $TERMINAL_TEST_MARK")).trim()).toBe("from-the-sandbox-environment");
    term.ws.close();
  });

  it("Ctrl-C interrupts the foreground command", async () => {
    const term = await openReadyTerminal(wsUrl(), auth);
    const pid = await shellPid(term);
    term.input("sleep 100\n");
    const sleeper = await until(() => childrenOf(pid).find((p) => comm(p) === "sleep"), { timeoutMs: 10_000 });
    term.input("\u0003");
    await until(() => !alive(sleeper));
    expect((await run(term, "echo back-$((6*7))")).trim()).toBe("back-42");
    term.ws.close();
  });

  it("closing the socket ends the shell and every job it started", async () => {
    const term = await openReadyTerminal(wsUrl(), auth);
    const pid = await shellPid(term);
    // bash prints the job's "[1] <pid>" too: the last line is $!
    const background = Number((await run(term, "nohup sleep 1000 >/dev/null 2>&1 & echo $!")).trim().split("\n").pop());
    expect(alive(pid) && alive(background)).toBe(true);
    term.ws.close();
    await until(() => !alive(pid) && !alive(background), { timeoutMs: 10_000 });
  });

  it("the shell exiting closes the socket with its status", async () => {
    const term = await openReadyTerminal(wsUrl(), auth);
    term.input("exit 7\n");
    expect(await term.closed).toEqual({ code: 1000, reason: "shell exited with status 7" });
  });

  it("several terminals at once, each its own shell on its own device", async () => {
    const terms = await Promise.all([1, 2, 3].map(() => openReadyTerminal(wsUrl(), auth)));
    const ttys = await Promise.all(terms.map((t) => run(t, "tty")));
    expect(new Set(ttys.map((t) => t.trim())).size).toBe(3);
    for (const t of terms) t.ws.close();
  });

  it("answers an unreadable frame with an error frame and goes on", async () => {
    const term = await openReadyTerminal(wsUrl(), auth);
    term.ws.send("not json");
    term.ws.send(JSON.stringify({ type: "resize", cols: 0, rows: 10 }));
    await until(() => term.errors().length === 2);
    expect(term.errors()[0]).toMatch(/unreadable frame/);
    expect((await run(term, "echo still-$((1+1))")).trim()).toBe("still-2");
    term.ws.close();
  });

  it("an unknown shell query falls back to the sandbox's shell", async () => {
    const term = await openReadyTerminal(wsUrl("?shell=/no/such/shell"), auth);
    expect((await run(term, "echo ok")).trim()).toBe("ok");
    term.ws.close();
  });
});

describe("/terminal/ws auth and switches", () => {
  it("refuses a missing or wrong token with 401 before the upgrade", async () => {
    await expect(openTerminal(wsUrl())).rejects.toMatchObject({ status: 401 });
    await expect(openTerminal(wsUrl("?token=wrong"))).rejects.toMatchObject({ status: 401 });
    await expect(openTerminal(wsUrl(), { authorization: "Bearer wrong" })).rejects.toMatchObject({ status: 401 });
  });

  it("GET /terminal serves the page, with the token as a header or ?token=", async () => {
    expect((await fetch(`${agent.url}/terminal`)).status).toBe(401);
    for (const res of [await fetch(`${agent.url}/terminal`, { headers: auth }), await fetch(`${agent.url}/terminal?token=${TOKEN}`)]) {
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/html/);
      expect(await res.text()).toContain("/ws");
    }
  });

  it("?token= is taken on the terminal's routes only", async () => {
    expect((await fetch(`${agent.url}/process?token=${TOKEN}`)).status).toBe(401);
  });

  it("DISABLE_TERMINAL=true turns both routes off (404), and the token never reaches the log", async () => {
    const off = await spawnAgent(
      ["--token", TOKEN, "--log-level", "debug", "--log-format", "json", "--root", agent.root + "-off", "--data-dir", agent.dataDir + "-off"],
      { DISABLE_TERMINAL: "true" },
    );
    try {
      expect((await fetch(`${off.url}/terminal`, { headers: auth })).status).toBe(404);
      await expect(openTerminal(`${off.url}/terminal/ws`, auth)).rejects.toMatchObject({ status: 404 });
      // switched off, the terminal's routes no longer take ?token= either
      expect((await fetch(`${off.url}/terminal?token=${TOKEN}`)).status).toBe(401);
      // the refused ?token= request is logged (a warning), its token replaced
      await until(() => off.stderr().includes("/terminal?token="));
      expect(off.stderr()).toContain("REDACTED");
      expect(off.stderr()).not.toContain(TOKEN);
    } finally {
      off.child.kill("SIGTERM");
      await off.exited;
    }
  });
});

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function comm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

function ioWritten(pid: number): number {
  try {
    return Number(/wchar:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/io`, "utf8"))![1]);
  } catch {
    return -1;
  }
}

describe.skipIf(!existsSync("/proc/self/io"))("a stalled client", () => {
  it("keeps the agent's memory bounded: the shell blocks on its terminal instead", async () => {
    const proc = await spawnAgent(["--token", TOKEN, "--root", agent.root + "-rss", "--data-dir", agent.dataDir + "-rss"]);
    try {
      const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proc.child.pid}/status`, "utf8"))![1]) / 1024;
      const term = await openReadyTerminal(`${proc.url}/terminal/ws?token=${TOKEN}`);
      const shell = await shellPid(term);
      term.ws.pause(); // the client stops reading: its socket's buffers fill, then the agent's would
      const before = rss();
      // 96 MiB of output to a client that reads none of it.
      term.input("head -c 100663296 /dev/zero | tr '\\0' x\n");
      const producer = await until(() => childrenOf(shell).find((p) => comm(p) === "tr"));
      // Wait until the producer stops making progress (blocked on the full terminal) or has written it all.
      let written = 0;
      let still = 0;
      while (still < 10 && written < 100663296) {
        await new Promise((r) => setTimeout(r, 100));
        const now = ioWritten(producer);
        if (now < 0) break; // exited: wrote it all
        still = now === written ? still + 1 : 0;
        written = now;
      }
      const growth = rss() - before;
      // Unbounded, the agent would hold all 96 MiB (and more, as JSON frames); bounded, the producer blocks after
      // the kernel's and the agent's few socket buffers, and the agent holds about as much.
      expect(growth, `the agent grew by ${growth.toFixed(1)} MiB`).toBeLessThan(48);
      expect(ioWritten(producer), "the producer wrote all 96 MiB: nothing held it back").toBeGreaterThan(0);
      term.ws.resume();
      term.input("\u0003");
      term.ws.close();
    } finally {
      proc.child.kill("SIGTERM");
      await proc.exited;
    }
  });
});
