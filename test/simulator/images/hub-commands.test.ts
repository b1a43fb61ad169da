import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveSimulator, type ServedSimulator } from "../../../simulator/serve.js";
import { defaultImageCacheDir, ImageStore } from "../../../simulator/images/image-store.js";
import { RECIPES, type Recipe } from "../../../simulator/images/recipes.js";
import { createLogger } from "../../../src/logging.js";
import { isolationUnavailable } from "../../helpers/sandbox-procs.js";
import { sdkForSimulator } from "../../helpers/sdk.js";

/**
 * What programs written for the platform's hub images run, in a real sandbox of
 * each hub image (the default isolating launcher, through the SDK): the
 * commands of what the platform's Dockerfile installs (git, bash, curl, nc,
 * python3, pip3), Node.js of the platform's major, BusyBox's
 * `adduser -D -u 1234 bob` and shadow's useradd, ss and netstat. Each image is
 * checked when the shared per-user cache holds its build, or when asked
 * (SANDBOX_KIT_HUB_IMAGE_TEST=base-image,node or =all builds them first; CI
 * asks for base-image), as in hub-build.test.ts.
 */
type Sdk = typeof import("@blaxel/core");
type Sandbox = Awaited<ReturnType<Sdk["SandboxInstance"]["create"]>>;
const WS = "hub-commands";
const KEY = "hub-commands-admin-key";
const store = new ImageStore({ dir: defaultImageCacheDir(), docker: null });
const wanted = (process.env.SANDBOX_KIT_HUB_IMAGE_TEST ?? "").split(",").map((s) => (s.trim() === "1" ? "base-image" : s.trim()));

async function skipReason(name: string): Promise<string> {
  if (isolationUnavailable) return ` (skipped: ${isolationUnavailable})`;
  if (wanted.includes("all") || wanted.includes(name) || (await store.locate(`blaxel/${name}`)).kind === "stored") return "";
  return ` (skipped: building blaxel/${name} takes minutes; run with SANDBOX_KIT_HUB_IMAGE_TEST=${name} or =all, or build it ahead: sandbox-sim images build blaxel/${name})`;
}
const skips = new Map<string, string>();
for (const r of RECIPES) skips.set(r.name, await skipReason(r.name));

let sim: ServedSimulator | undefined;
let sdk: Sdk;
beforeAll(async () => {
  if ([...skips.values()].every((s) => s !== "")) return;
  sim = await serveSimulator({ port: 0, apiKey: KEY, workspace: WS }, { logger: createLogger({ level: "error" }) });
  sdk = await sdkForSimulator(sim.env);
}, 60_000);
afterAll(async () => {
  await sim?.stop();
});

async function run(sandbox: Sandbox, command: string): Promise<{ exitCode: number; out: string }> {
  const p = await sandbox.process.exec({ command, waitForCompletion: true });
  return { exitCode: p.exitCode ?? -1, out: `${p.stdout ?? ""}${p.stderr ?? ""}` };
}

/** The commands a platform Dockerfile's packages give (Alpine's names and Debian's). */
const COMMANDS: Record<string, [string, RegExp]> = {
  bash: ["bash --version", /GNU bash, version 5\./],
  git: ["git --version", /^git version 2\./],
  curl: ["curl --version", /^curl \d/],
  "netcat-openbsd": ["nc -h 2>&1; true", /usage: nc /i],
  python3: ["python3 --version", /^Python 3\.\d+/],
  "py3-pip": ["pip3 --version", /^pip \d+/],
  "python3-dev": ["python3-config --includes", /-I\/usr\/include\/python3/],
  gcc: ["gcc --version", /^gcc /],
  "g++": ["g++ --version", /^g\+\+ /],
};

const nodeMajor = (r: Recipe) => r.steps.flatMap((s) => (s.kind === "node-release" ? [s.major] : []))[0];

for (const recipe of RECIPES) {
  const skip = skips.get(recipe.name)!;
  describe.skipIf(skip !== "")(`a blaxel/${recipe.name} sandbox${skip}`, () => {
    let sandbox: Sandbox;
    beforeAll(async () => {
      sandbox = await sdk.SandboxInstance.create({ name: `cmd-${recipe.name}`, image: `blaxel/${recipe.name}`, memory: 2048 });
    }, 45 * 60_000);
    afterAll(async () => {
      if (sandbox) await sdk.SandboxInstance.delete(`cmd-${recipe.name}`).catch(() => undefined);
    });

    it(`runs what the platform's ${recipe.platform.from} Dockerfile installs (${recipe.platform.packages.join(", ")})`, async () => {
      for (const pkg of recipe.platform.packages) {
        const check = COMMANDS[pkg];
        if (!check) continue; // not a command (fonts, uv's requirements)
        const r = await run(sandbox, check[0]);
        expect([r.exitCode, r.out], check[0]).toEqual([0, expect.stringMatching(check[1])]);
      }
    });

    const major = nodeMajor(recipe);
    it.skipIf(!major)(`has Node.js ${major ?? "(none)"} as the platform's image, and npm`, async () => {
      const r = await run(sandbox, "node -v && npm -v && command -v node");
      expect(r.exitCode, r.out).toBe(0);
      expect(r.out).toMatch(new RegExp(`^v${major}\\.\\d+\\.\\d+\\n\\d+\\.\\d+\\.\\d+\\n/usr/local/bin/node\\n$`));
    });

    it("creates users as BusyBox does (adduser -D -u 1234 bob) and as shadow does (useradd), and a program runs as one", async () => {
      const r = await run(
        sandbox,
        "adduser -D -u 1234 bob && id bob && useradd -m -u 1235 carol && id carol && addgroup -g 2000 crew && adduser bob crew && id -nG bob",
      );
      expect(r.exitCode, r.out).toBe(0);
      expect(r.out).toContain("uid=1234(bob) gid=1234(bob) groups=1234(bob)\n");
      expect(r.out).toContain("uid=1235(carol) gid=1235(carol) groups=1235(carol)\n");
      expect(r.out).toMatch(/bob crew\n$/);
      const again = await run(sandbox, "adduser -D bob");
      expect(again).toEqual({ exitCode: 1, out: "adduser: user 'bob' in use\n" });
      const as = await run(sandbox, "su -s /bin/sh -c 'id -un; echo $HOME' bob");
      expect(as.out).toBe("bob\n/home/bob\n");
    });

    it("has ss, netstat and ip for what listens", async () => {
      const r = await run(sandbox, "ss -ltn && netstat -ltn && ip -o link show lo");
      expect(r.exitCode, r.out).toBe(0);
      expect(r.out).toMatch(/State\s+Recv-Q\s+Send-Q/);
      expect(r.out).toMatch(/Active Internet connections \(only servers\)/);
      expect(r.out).toMatch(/\d+: lo:/);
    });
  });
}
