import { createHash } from "node:crypto";
import type { ImageRef } from "./image-ref.js";
import { BUSYBOX_USER_TOOLS } from "./busybox-users.js";
import { INTERPRETER_SERVER_PY } from "./interpreter-server.js";
import { nextConfig, tsConfig, tsIndex, tsPackage, viteConfig } from "./recipe-files.js";

/**
 * The hub images the SDK and its users name, rebuilt from Debian packages
 * (mmdebstrap) plus npm where the platform's image holds an app. What each
 * holds follows the public hub Dockerfiles of the platform (blaxel-ai/sandbox,
 * hub/<name>/Dockerfile and entrypoint.sh): the platform's images are Alpine
 * (BusyBox) or Debian slim with Node 22-24 and Python 3.12; here they are
 * Debian 13 (trixie) with Python 3.13, the Node.js major of the platform's
 * image (Node.js's official binary from the npm registry), and what programs
 * written for the platform's images call: BusyBox's adduser/addgroup, useradd,
 * nc, ss/ip and netstat — see docs/images.md.
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
  /** What the platform's image is made from (hub/<name>/Dockerfile: its FROM and the packages it adds), for docs/images.md. */
  platform: { from: string; packages: string[] };
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
  /**
   * Node.js's official binary of a major (its latest) from the npm registry, checked against the registry's
   * sha512 and cached (node-release.ts), under /usr/local as in the official node images; Debian's nodejs
   * (debianFallback) where the host has no npm to ask the registry with.
   */
  | { kind: "node-release"; major: string; debianFallback: string }
  | { kind: "file"; path: string; content: string; mode?: number };

export const DEBIAN_SUITE = "trixie";
/**
 * Every hub image has a shell, git, curl, nc and the usual process tools (the hub images' apk/apt lines, and
 * what BusyBox gives the Alpine ones: ps, ip, netstat); useradd and the rest of shadow's tools (passwd), which
 * the BusyBox-compatible adduser/addgroup (COMMON_STEPS) work with; ss (iproute2).
 */
export const COMMON_PACKAGES = ["bash", "ca-certificates", "curl", "git", "netcat-openbsd", "procps", "less", "tzdata", "passwd", "iproute2", "net-tools"];
/** Written into every hub image before its own steps: BusyBox's adduser, addgroup, deluser and delgroup. */
export const COMMON_STEPS: RecipeStep[] = BUSYBOX_USER_TOOLS.map((t) => ({ kind: "file", path: t.path, content: t.content, mode: 0o755 }));
/** The platform image's Node.js major, as its Dockerfile's FROM names it. */
const node = (major: string): RecipeStep => ({ kind: "node-release", major, debianFallback: "nodejs" });
/**
 * npm from the registry instead of Debian's npm package, which depends on
 * some 340 node-* packages (four in five of a Node image's packages, most of
 * its cold build); the platform's node images ship npm 11 too. Debian's npm
 * is installed instead where the host has no npm to install it with.
 */
const NPM: RecipeStep = { kind: "npm-global", label: "installing npm", packages: ["npm@11"], debianFallback: "npm" };
const PYTHON = ["python3", "python3-pip", "python3-venv"];
const HOME_ENV = ["HOME=/blaxel", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"];

export const RECIPES: Recipe[] = [
  {
    name: "base-image",
    description: "Node.js 24, Python 3 with pip, git, curl and bash (the SDK's default image)",
    packages: PYTHON,
    platform: { from: "node:24-alpine", packages: ["bash", "git", "python3", "py3-pip"] },
    steps: [node("24"), NPM],
    env: HOME_ENV,
    workingDir: "/blaxel",
    ports: [],
    services: [],
  },
  {
    name: "node",
    description: "Node.js 23 with npm and git",
    packages: [],
    platform: { from: "node:23-alpine", packages: ["git"] },
    steps: [node("23"), NPM],
    env: HOME_ENV,
    workingDir: "/blaxel",
    ports: [3000],
    services: [],
  },
  {
    name: "py-app",
    description: "Python 3 with pip and venv, git",
    packages: PYTHON,
    platform: { from: "python:3.12-slim", packages: ["git"] },
    steps: [],
    env: HOME_ENV,
    workingDir: "/blaxel",
    ports: [8000],
    services: [],
  },
  {
    name: "ts-app",
    description: "Node.js 22 with a TypeScript app at /blaxel/app (npm run dev: tsx watch on port 3000)",
    packages: [],
    platform: { from: "node:22-slim", packages: ["git"] },
    steps: [
      node("22"),
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
    description: "Node.js 22 with a Next.js app at /blaxel/app, its dev server started on port 3000",
    packages: [],
    platform: { from: "node:22-alpine", packages: ["git", "curl", "netcat-openbsd"] },
    steps: [
      node("22"),
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
    description: "Node.js 22 with a Vite + React + TypeScript app at /blaxel/app, its dev server started on port 5173",
    packages: [],
    platform: { from: "node:22-alpine", packages: ["git"] },
    steps: [
      node("22"),
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
    platform: {
      from: "python:3.12-slim",
      packages: ["git", "curl", "netcat-openbsd", "fonts-noto-cjk", "gcc", "g++", "python3-dev", "uv", "requirements.txt (Jupyter, numpy, pandas...)"],
    },
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
  const what = { suite: DEBIAN_SUITE, common: COMMON_PACKAGES, commonSteps: COMMON_STEPS, ...recipe, description: undefined, platform: undefined };
  return `sha256:${createHash("sha256").update(JSON.stringify(what)).digest("hex")}`;
}
