import { apkScript } from "./apk-stand-in.js";
import type { ImageRef } from "./image-ref.js";
import { DEBIAN_SUITE, type Recipe, type RecipeStep } from "./recipes.js";

/**
 * Offline stand-ins of the common official base images. Where no registry
 * answers (the simulator's machines), a template's `FROM node:20-slim`,
 * `FROM python:3.11-slim` or `FROM debian:bookworm-slim` (ImageInstance.fromRegistry's
 * usual bases) gets a root filesystem built from Debian packages with the
 * hub images' recipe builder (mmdebstrap), kept in the image store under
 * STAND_IN_REPOSITORY/<name>:<tag> and given to the builder under the name the
 * Dockerfile uses (template-build.ts). What differs from the real image is
 * said in the build's events (`note`); the `-alpine` variants are Debian too,
 * with an `apk` that installs Debian equivalents (apk-stand-in.ts).
 */

export const STAND_IN_REPOSITORY = "sandbox-kit-stand-ins";

export interface StandIn {
  /** The store name it is kept under. */
  name: string;
  recipe: Recipe;
  /** How it differs from the official image (the build's events say it). */
  note: string;
}

/** What the official images are: one of these repositories on Docker Hub (`node`, `library/node`, `docker.io/node`). */
function officialName(ref: ImageRef): string | undefined {
  if (ref.registry && ref.registry !== "docker.io" && ref.registry !== "index.docker.io") return undefined;
  const repo = ref.repository.replace(/^library\//, "");
  return ["node", "python", "debian"].includes(repo) ? repo : undefined;
}

const DEBIAN_SUITES: Record<string, string> = { bookworm: "bookworm", "12": "bookworm", trixie: "trixie", "13": "trixie", stable: "trixie", latest: "trixie" };
/** The Node.js major Debian's own nodejs package has in DEBIAN_SUITE; others come from the npm registry's official binaries. */
export const DEBIAN_NODE_MAJOR = 20;
/** The npm each Node major's official image ships. */
const NPM_OF_MAJOR: Record<number, string> = { 18: "npm@10", 20: "npm@10", 22: "npm@10", 24: "npm@11" };
const PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/** A slim official image: a shell, apt, certificates. The full ones (buildpack-deps) have the usual fetch and build tools. */
const SLIM = ["ca-certificates"];
const FULL = ["ca-certificates", "curl", "wget", "git", "gnupg", "openssh-client", "procps", "netbase", "xz-utils", "unzip", "make", "g++"];
const ALPINE = ["ca-certificates", "busybox"];

/** `<version>[-variant]`: variant is slim, alpine[3.x], <suite>[-slim] or absent. */
function splitTag(tag: string): { version: string; flavour: "slim" | "alpine" | "full"; suite?: string } | undefined {
  const m = /^([0-9][0-9.]*)(?:-(.+))?$/.exec(tag);
  if (!m) return undefined;
  const variant = m[2] ?? "";
  if (variant === "") return { version: m[1]!, flavour: "full" };
  if (variant === "slim") return { version: m[1]!, flavour: "slim" };
  if (/^alpine(\d+\.\d+)?$/.test(variant)) return { version: m[1]!, flavour: "alpine" };
  const suite = /^(bookworm|trixie|bullseye)(-slim)?$/.exec(variant);
  if (suite) return { version: m[1]!, flavour: suite[2] ? "slim" : "full", suite: suite[1] };
  return undefined;
}

function flavourPackages(flavour: "slim" | "alpine" | "full"): string[] {
  return flavour === "slim" ? SLIM : flavour === "alpine" ? ALPINE : FULL;
}

const APK_STEP: RecipeStep = { kind: "file", path: "/sbin/apk", content: apkScript(), mode: 0o755 };

function recipe(name: string, packages: string[], basePackages: string[], steps: RecipeStep[], env: string[], suite = DEBIAN_SUITE): Recipe {
  return {
    name,
    description: `offline stand-in of ${name}`,
    packages,
    basePackages,
    steps,
    env: [PATH_ENV, ...env],
    workingDir: "/",
    ports: [],
    services: [],
    suite,
    // (It is the official image itself that it stands in for.)
    platform: { from: name, packages: [] },
  };
}

/** Why an official name has no stand-in here, when it looks like one that should (an unknown Node major, Python 2). */
export class NoStandIn extends Error {}

/** The stand-in for an official image, or undefined for a name that is none of the official images covered. Throws NoStandIn with the reason for a tag those images do not cover. */
export function standInFor(ref: ImageRef): StandIn | undefined {
  const official = officialName(ref);
  if (!official) return undefined;
  const name = `${official}:${ref.tag}`;
  const storeName = `${STAND_IN_REPOSITORY}/${name}`;
  if (official === "debian") {
    const m = /^([a-z0-9]+)(-slim)?$/.exec(ref.tag);
    const suite = m ? DEBIAN_SUITES[m[1]!] : undefined;
    if (!suite) throw new NoStandIn(`no offline stand-in for ${name}: the stand-ins cover debian:${Object.keys(DEBIAN_SUITES).join("|")}[-slim]`);
    return { name: storeName, recipe: recipe(name, [], m![2] ? SLIM : FULL, [], [], suite), note: `Debian ${suite} from mmdebstrap` };
  }
  const tag = splitTag(ref.tag);
  if (!tag) throw new NoStandIn(`no offline stand-in for ${name}: the stand-ins cover ${official}:<version>[-slim|-alpine|-bookworm|-trixie]`);
  const suiteNote = tag.suite && tag.suite !== DEBIAN_SUITE ? `; Debian ${DEBIAN_SUITE} rather than ${tag.suite}` : "";
  const alpine = tag.flavour === "alpine";
  const alpineNote = alpine ? `; Debian rather than Alpine, with an apk that installs the Debian equivalents of the Alpine packages it knows` : "";
  const apk = alpine ? [APK_STEP] : [];
  if (official === "python") {
    const m = /^3\.(\d+)/.exec(tag.version);
    if (!m) throw new NoStandIn(`no offline stand-in for ${name}: the stand-ins cover Python 3 only`);
    // pip installs into the system Python as in the official image (which has no EXTERNALLY-MANAGED marker).
    const pipConf: RecipeStep = { kind: "file", path: "/etc/pip.conf", content: "[global]\nbreak-system-packages = true\nroot-user-action = ignore\n" };
    return {
      name: storeName,
      recipe: recipe(name, ["python3", "python3-pip", "python3-venv", "python-is-python3"], flavourPackages(tag.flavour), [pipConf, ...apk], ["LANG=C.UTF-8"]),
      note: `Debian ${DEBIAN_SUITE}'s Python 3.13 stands in for ${tag.version}${suiteNote}${alpineNote}`,
    };
  }
  const major = Number(/^\d+/.exec(tag.version)![0]);
  const npm: RecipeStep = { kind: "npm-global", label: "installing npm", packages: [NPM_OF_MAJOR[major] ?? "npm@11"], debianFallback: "npm" };
  if (major === DEBIAN_NODE_MAJOR)
    return {
      name: storeName,
      recipe: recipe(name, ["nodejs"], flavourPackages(tag.flavour), [npm, ...apk], []),
      note: `Debian ${DEBIAN_SUITE}'s Node.js ${DEBIAN_NODE_MAJOR} and npm from the npm registry${suiteNote}${alpineNote}`,
    };
  // Another major: the official binary from the npm registry (node-release.ts), under /usr/local as in the official image.
  const release: RecipeStep = { kind: "node-release", major: String(major), debianFallback: "nodejs" };
  return {
    name: storeName,
    recipe: recipe(name, [], flavourPackages(tag.flavour), [release, npm, ...apk], []),
    note: `Debian ${DEBIAN_SUITE} with Node.js ${major}'s official binary from the npm registry and npm${suiteNote}${alpineNote}`,
  };
}
