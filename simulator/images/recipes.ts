import { createHash } from "node:crypto";
import type { ImageRef } from "./image-ref.js";
import { INTERPRETER_SERVER_PY } from "./interpreter-server.js";

/**
 * The hub images the SDK and its users name, rebuilt from Debian packages
 * (mmdebstrap) plus npm where the platform's image holds an app. What each
 * holds follows the public hub Dockerfiles of the platform (blaxel-ai/sandbox,
 * hub/<name>/Dockerfile and entrypoint.sh): the platform's images are Alpine
 * or Debian with Node 22-24 and Python 3.12; here they are Debian 13 (trixie)
 * with its Node 20 and Python 3.13 — see docs/images.md.
 */

/** A process the image's entrypoint starts beside the agent (hub/<name>/entrypoint.sh). */
export interface ImageService {
  name: string;
  command: string;
  workingDir: string;
  env?: Record<string, string>;
  /**
   * Ports the sandbox waits for before it is ready: where the platform's entrypoint starts the service
   * before its daemon (hub/jupyter-server/entrypoint.sh), it already answers when the sandbox does.
   */
  waitForPorts?: number[];
}

export interface Recipe {
  name: string;
  description: string;
  /** Debian packages beyond the common set. */
  packages: string[];
  /** Run on the host after the root filesystem is unpacked (creating apps with npm), in order. */
  steps: RecipeStep[];
  /** The image's environment (Dockerfile ENV). */
  env: string[];
  workingDir: string;
  /** Ports the image serves on (Dockerfile EXPOSE, beyond the agent's). */
  ports: number[];
  services: ImageService[];
  /** The Debian suite (default DEBIAN_SUITE): the offline stand-ins of official images follow their tag's (stand-ins.ts). */
  suite?: string;
  /** The packages every image gets (default COMMON_PACKAGES): a slim official image's stand-in has fewer. */
  basePackages?: string[];
}

export type RecipeStep =
  | { kind: "npm"; label: string; cwd: string; args: string[] }
  /** npm install --global into the image's /usr (npm itself: the registry's, with its dependencies bundled). */
  | { kind: "npm-global"; label: string; packages: string[]; debianFallback: string }
  | { kind: "file"; path: string; content: string; mode?: number };

export const DEBIAN_SUITE = "trixie";
/** Every hub image has a shell, git, curl and the usual process tools (the hub images' apk/apt lines). */
export const COMMON_PACKAGES = ["bash", "ca-certificates", "curl", "git", "netcat-openbsd", "procps", "less", "tzdata"];
const NODE = ["nodejs"];
/**
 * npm from the registry instead of Debian's npm package, which depends on
 * some 340 node-* packages (four in five of a Node image's packages, most of
 * its cold build); the platform's node images ship npm 11 too. Debian's npm
 * is installed instead where the host has no npm to install it with.
 */
const NPM: RecipeStep = { kind: "npm-global", label: "installing npm", packages: ["npm@11"], debianFallback: "npm" };
const PYTHON = ["python3", "python3-pip", "python3-venv"];
const HOME_ENV = ["HOME=/blaxel", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"];

const viteConfig = `import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

// The dev server answers on every address and any Host (previews, /port/5173).
export default defineConfig({
  plugins: [react()],
  server: { port: 5173, host: '::', allowedHosts: true },
})
`;

const nextConfig = `import type { NextConfig } from "next";

// Previews reach the dev server under other host names.
const nextConfig: NextConfig = { allowedDevOrigins: ["*", "**"] };

export default nextConfig;
`;

const tsPackage =
  JSON.stringify(
    { name: "app", version: "1.0.0", private: true, type: "module", scripts: { dev: "tsx watch src/index.ts", build: "tsc", start: "node dist/index.js" } },
    null,
    2,
  ) + "\n";
const tsIndex = `import { createServer } from "node:http";

const port = Number(process.env.PORT ?? 3000);
createServer((_req, res) => {
  res.setHeader("content-type", "text/plain");
  res.end("Hello from the ts-app sandbox\\n");
}).listen(port, "0.0.0.0", () => console.log(\`listening on \${port}\`));
`;
const tsConfig =
  JSON.stringify(
    {
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        outDir: "dist",
        strict: true,
        esModuleInterop: true,
        skipLibCheck: true,
      },
      include: ["src"],
    },
    null,
    2,
  ) + "\n";

export const RECIPES: Recipe[] = [
  {
    name: "base-image",
    description: "Node.js, Python 3 with pip, git, curl and bash (the SDK's default image)",
    packages: [...NODE, ...PYTHON],
    steps: [NPM],
    env: HOME_ENV,
    workingDir: "/blaxel",
    ports: [],
    services: [],
  },
  { name: "node", description: "Node.js with npm and git", packages: NODE, steps: [NPM], env: HOME_ENV, workingDir: "/blaxel", ports: [3000], services: [] },
  {
    name: "py-app",
    description: "Python 3 with pip and venv, git",
    packages: PYTHON,
    steps: [],
    env: HOME_ENV,
    workingDir: "/blaxel",
    ports: [8000],
    services: [],
  },
  {
    name: "ts-app",
    description: "Node.js with a TypeScript app at /blaxel/app (npm run dev: tsx watch on port 3000)",
    packages: NODE,
    steps: [
      NPM,
      { kind: "file", path: "/blaxel/app/package.json", content: tsPackage },
      { kind: "file", path: "/blaxel/app/tsconfig.json", content: tsConfig },
      { kind: "file", path: "/blaxel/app/src/index.ts", content: tsIndex },
      {
        kind: "npm",
        label: "installing typescript and tsx",
        cwd: "/blaxel/app",
        args: ["install", "--save-dev", "--no-audit", "--no-fund", "typescript", "tsx", "@types/node"],
      },
    ],
    env: HOME_ENV,
    workingDir: "/blaxel",
    ports: [3000],
    services: [],
  },
  {
    name: "nextjs",
    // The hub's flags (hub/nextjs/Dockerfile) for create-next-app 16, pinned to a major: its flags change between them.
    description: "Node.js with a Next.js app at /blaxel/app, its dev server started on port 3000",
    packages: NODE,
    steps: [
      NPM,
      {
        kind: "npm",
        label: "creating the Next.js app",
        cwd: "/blaxel",
        args: [
          "exec",
          "--yes",
          "--",
          "create-next-app@16",
          "app",
          "--use-npm",
          "--typescript",
          "--eslint",
          "--tailwind",
          "--src-dir",
          "--app",
          "--import-alias",
          "@/*",
          "--disable-git",
          "--yes",
        ],
      },
      { kind: "file", path: "/blaxel/app/next.config.ts", content: nextConfig },
    ],
    env: HOME_ENV,
    workingDir: "/blaxel",
    ports: [3000],
    services: [{ name: "dev-server", command: "npm run dev -- --port 3000 --hostname 0.0.0.0", workingDir: "/blaxel/app" }],
  },
  {
    name: "vite",
    description: "Node.js with a Vite + React + TypeScript app at /blaxel/app, its dev server started on port 5173",
    packages: NODE,
    steps: [
      NPM,
      {
        kind: "npm",
        label: "creating the Vite app",
        cwd: "/blaxel",
        args: ["exec", "--yes", "--", "create-vite@9", "app", "--template", "react-ts", "--no-interactive"],
      },
      { kind: "file", path: "/blaxel/app/vite.config.ts", content: viteConfig },
      { kind: "npm", label: "installing the Vite app's dependencies", cwd: "/blaxel/app", args: ["install", "--no-audit", "--no-fund"] },
    ],
    env: HOME_ENV,
    workingDir: "/blaxel",
    ports: [5173],
    services: [{ name: "dev-server", command: "npm run dev -- --port 5173", workingDir: "/blaxel/app" }],
  },
  {
    name: "jupyter-server",
    description: "Python 3 with Jupyter Server, an IPython kernel, numpy, pandas and matplotlib; the code interpreter's server on port 8888, Jupyter on 12345",
    packages: [
      ...PYTHON,
      "jupyter-server",
      "python3-ipykernel",
      "python3-jupyter-client",
      "python3-numpy",
      "python3-pandas",
      "python3-matplotlib",
      "python3-requests",
      "gcc",
      "g++",
      "python3-dev",
    ],
    steps: [
      { kind: "file", path: "/opt/sandbox-kit/interpreter.py", content: INTERPRETER_SERVER_PY, mode: 0o755 },
      { kind: "file", path: "/app/.config/matplotlib/matplotlibrc", content: "backend: Agg\n" },
    ],
    env: [
      "HOME=/app",
      "MPLCONFIGDIR=/app/.config/matplotlib",
      "PIP_DISABLE_PIP_VERSION_CHECK=1",
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ],
    workingDir: "/app",
    ports: [8888, 12345],
    // hub/jupyter-server/entrypoint.sh: Jupyter on 12345, the interpreter's own server on 8888.
    services: [
      {
        name: "jupyter",
        command:
          "python3 -m jupyter_server --no-browser --ip=0.0.0.0 --port=12345 --ServerApp.token= --ServerApp.password= --allow-root --ServerApp.root_dir=/app",
        workingDir: "/app",
        env: { HOME: "/app" },
      },
      {
        name: "interpreter",
        command: "python3 /opt/sandbox-kit/interpreter.py",
        workingDir: "/app",
        env: { HOME: "/app", INTERPRETER_PORT: "8888", INTERPRETER_ROOT: "/app" },
        waitForPorts: [8888],
      },
    ],
  },
];

/**
 * The recipe a reference names: `blaxel/<name>`, or the bare `<name>` when
 * `bareNames` (the caller checked that no Docker image has that name),
 * whatever its tag (isHubTag says whether the hub has that tag).
 */
export function recipeFor(ref: ImageRef, bareNames: boolean): Recipe | undefined {
  if (ref.registry && ref.registry !== "docker.io" && ref.registry !== "ghcr.io") return undefined;
  const [owner, name, ...more] = ref.repository.split("/");
  if (more.length > 0) return undefined;
  const wanted = name === undefined ? (bareNames ? owner : undefined) : owner === "blaxel" ? name : undefined;
  return RECIPES.find((r) => r.name === wanted);
}

/**
 * The tags the hub publishes for its images (blaxel-ai/sandbox,
 * .github/workflows/build.yaml and scripts/mk3-build.sh): a release (a
 * `vX.Y.Z` git tag) builds every hub image, tags it `latest` and with the
 * release's semver version (`X.Y.Z`, `X.Y.Z-rc.1`), and registers it on the
 * platform as `blaxel/<name>:<tag>`; the hub's store entry points at
 * `latest`. Branch builds (`develop`, `<branch>-<sha>`) go to the dev
 * environment only. The simulator builds one image per recipe: every
 * published tag maps to it; any other tag is not an image the hub has.
 */
export function isHubTag(tag: string): boolean {
  return tag === "latest" || /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$/.test(tag);
}

/** The hub names as the platform lists them (INVALID_IMAGE's supported_images). */
export const HUB_IMAGES = RECIPES.map((r) => `blaxel/${r.name}:latest`);

/** Identity of what a recipe builds: a changed recipe makes the cached image stale. */
export function recipeDigest(recipe: Recipe): string {
  const what = { suite: DEBIAN_SUITE, common: COMMON_PACKAGES, ...recipe, description: undefined };
  return `sha256:${createHash("sha256").update(JSON.stringify(what)).digest("hex")}`;
}
