import { execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { streamProgress } from "../../../simulator/images/progress.js";
import { bwrapPath } from "../../../simulator/launcher/index.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * Real hub images, built with mmdebstrap from Debian's mirror. Building takes
 * minutes, so an image is tested when asked (SANDBOX_KIT_HUB_IMAGE_TEST=1 for
 * blaxel/base-image, or a comma list such as "base-image,jupyter-server"; the
 * build goes to the shared per-user cache) or when that cache already holds
 * an up-to-date build (then it is only checked, in seconds).
 */
const store = new ImageStore({ dir: defaultImageCacheDir(), docker: null });
const wanted = (process.env.SANDBOX_KIT_HUB_IMAGE_TEST ?? "").split(",").map((s) => (s.trim() === "1" ? "base-image" : s.trim()));

async function skipReason(name: string): Promise<string> {
  if (wanted.includes(name) || (await store.locate(`blaxel/${name}`)).kind === "stored") return "";
  return ` (skipped: building blaxel/${name} takes minutes; run with SANDBOX_KIT_HUB_IMAGE_TEST=${name}, or build it ahead: sandbox-sim images build blaxel/${name})`;
}

/** Runs argv with the image as `/` (bubblewrap), or undefined where bubblewrap cannot here. */
function inImage(rootfs: string, extra: string[], argv: string[]): string[] | undefined {
  const bwrap = bwrapPath();
  if (!bwrap) return undefined;
  try {
    execFileSync(bwrap, ["--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "true"], { stdio: "ignore" });
  } catch {
    return undefined;
  }
  return [bwrap, "--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--die-with-parent", ...extra, ...argv];
}

const baseSkip = await skipReason("base-image");
describe.skipIf(baseSkip !== "")(`the blaxel/base-image hub image${baseSkip}`, () => {
  it(
    "is a Debian root filesystem with Node.js 24 (the official binary), npm, Python, pip, git and curl, and its manifest",
    { timeout: 45 * 60_000 },
    async () => {
      const image = await store.ensure("blaxel/base-image:latest", streamProgress(process.stderr, "blaxel/base-image"));
      for (const tool of [
        "usr/local/bin/node",
        "usr/bin/npm",
        "usr/bin/python3",
        "usr/bin/pip3",
        "usr/bin/git",
        "usr/bin/curl",
        "usr/bin/bash",
        "etc/debian_version",
      ]) {
        expect(existsSync(join(image.rootfs, tool)), tool).toBe(true);
      }
      expect(image.manifest).toMatchObject({
        source: "recipe",
        origin: "base-image",
        config: { env: expect.arrayContaining(["HOME=/blaxel"]), workingDir: "/blaxel" },
      });
      expect(image.manifest.size).toBeGreaterThan(100 * 2 ** 20);
      expect(existsSync(join(image.rootfs, "blaxel"))).toBe(true);
      const argv = inImage(image.rootfs, ["--unshare-all"], ["sh", "-c", "node -p process.version && python3 -c 'import sys; print(sys.version_info[0])'"]);
      if (!argv) return console.warn("bubblewrap cannot run here: the image's programs were not run");
      expect(execFileSync(argv[0]!, argv.slice(1), { encoding: "utf8" })).toMatch(/^v24\.\d+\.\d+\n3\n$/);
    },
  );
});

const jupyterSkip = await skipReason("jupyter-server");
describe.skipIf(jupyterSkip !== "")(`the blaxel/jupyter-server hub image${jupyterSkip}`, () => {
  it("runs the code interpreter's server: code runs in an IPython kernel, its output streams back as NDJSON", { timeout: 45 * 60_000 }, async () => {
    const image = await store.ensure("blaxel/jupyter-server:latest", streamProgress(process.stderr, "blaxel/jupyter-server"));
    expect(image.manifest.services.map((s) => s.name)).toEqual(["jupyter", "interpreter"]);
    const app = trackedTempDir("jupyter-app-");
    cpSync(join(image.rootfs, "app"), app, { recursive: true });
    const argv = inImage(
      image.rootfs,
      [
        "--unshare-pid",
        "--bind",
        app,
        "/app",
        "--setenv",
        "HOME",
        "/app",
        "--setenv",
        "MPLCONFIGDIR",
        "/app/.config/matplotlib",
        "--setenv",
        "INTERPRETER_PORT",
        "0",
      ],
      ["python3", "/opt/sandbox-kit/interpreter.py"],
    );
    if (!argv) return console.warn("bubblewrap cannot run here: the interpreter was not started");
    const server = spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", "pipe", "inherit"] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        createInterface({ input: server.stdout! }).on("line", (line) => {
          const m = /listening on (\d+)/.exec(line);
          if (m) resolve(Number(m[1]));
        });
        server.once("exit", (code) => reject(new Error(`the interpreter exited (${code})`)));
      });
      const res = await fetch(`http://127.0.0.1:${port}/execute`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ code: "import sys\nprint(6 * 7)\nprint('oops', file=sys.stderr)\n{'answer': 42}", env_vars: { GREETING: "hi" } }),
      });
      expect(res.status).toBe(200);
      const lines = (await res.text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines).toContainEqual(expect.objectContaining({ type: "stdout", text: "42\n" }));
      expect(lines).toContainEqual(expect.objectContaining({ type: "stderr", text: "oops\n" }));
      expect(lines).toContainEqual(expect.objectContaining({ type: "result", text: "{'answer': 42}", is_main_result: true }));
      const failed = await (
        await fetch(`http://127.0.0.1:${port}/execute`, { method: "POST", body: JSON.stringify({ code: "import os; os.environ['GREETING'] + 1" }) })
      ).text();
      expect(failed).toContain('"name": "TypeError"');
      const context = (await (
        await fetch(`http://127.0.0.1:${port}/contexts`, { method: "POST", body: JSON.stringify({ language: "python", cwd: "/tmp" }) })
      ).json()) as { id: string };
      const cwd = await (
        await fetch(`http://127.0.0.1:${port}/execute`, { method: "POST", body: JSON.stringify({ code: "import os; os.getcwd()", context_id: context.id }) })
      ).text();
      expect(cwd).toContain(`"text": "'/tmp'"`);
    } finally {
      server.kill("SIGKILL");
    }
  });
});
