import { execFileSync } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join, relative } from "node:path";
import { AGENT_NODE_FLAGS, packageRootOf } from "./agent-main.js";

/**
 * The agent as every isolated sandbox gets it: the host's node binary, the
 * shared libraries it needs and their dynamic loader, setpriv (util-linux,
 * to start commands with no capabilities) and this package, all bound
 * read-only under /opt/sandbox-kit, never copied into the image. Node starts
 * through the kit's own loader with --library-path, so it runs whatever libc
 * the image has (or none: a tiny test image works).
 */

export const KIT = "/opt/sandbox-kit";
const KIT_LIB = `${KIT}/lib`;

export interface SandboxKit {
  /** bwrap arguments binding the kit into the sandbox. */
  binds: string[];
  /** Argv prefix that runs a kit binary (node, setpriv) through the kit's loader. */
  loader: string[];
  /** The agent's main script inside the sandbox. */
  agentMain: string;
  /** The warm agent (simulator/launcher/warm-agent.js) inside the sandbox. */
  warmMain: string;
  /** Argv prefix the agent starts every command through: no capabilities, none inheritable, none regainable. */
  processWrapper: string[];
}

/** `ldd` lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader "/lib64/ld-linux-x86-64.so.2 (0x...)". */
export function parseLdd(output: string): { libs: Map<string, string>; loader?: string } {
  const libs = new Map<string, string>();
  let loader: string | undefined;
  for (const line of output.split("\n")) {
    const linked = /^\s*(\S+) => (\/\S+) \(/.exec(line);
    if (linked) {
      libs.set(linked[1]!, linked[2]!);
      continue;
    }
    const direct = /^\s*(\/\S*ld-linux\S*|\/\S*ld-musl\S*|\/\S*ld\.so\S*) \(/.exec(line);
    if (direct) loader = direct[1]!;
  }
  return { libs, loader };
}

function ldd(file: string): string {
  try {
    return execFileSync("ldd", [file], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    // A static binary: "not a dynamic executable" (exit 1) — nothing to bind.
    return (err as { stdout?: string }).stdout ?? "";
  }
}

/** better-sqlite3's native module, resolved as the agent resolves it, for its shared libraries. */
function nativeModules(pkg: string): string[] {
  try {
    const require = createRequire(join(pkg, "package.json"));
    const dir = dirname(require.resolve("better-sqlite3/package.json"));
    const file = join(dir, "build", "Release", "better_sqlite3.node");
    return existsSync(file) ? [file] : [];
  } catch {
    return [];
  }
}

/**
 * Where the package's dependencies resolve from: its own node_modules, and,
 * installed as a dependency (npm hoists), the node_modules directory holding
 * it. Bound at <KIT>/node_modules and /opt/node_modules, Node's resolution
 * from <KIT>/dist walks both.
 */
export function dependencyRoots(pkg: string): { source: string; target: string }[] {
  const roots: { source: string; target: string }[] = [];
  if (existsSync(join(pkg, "node_modules"))) roots.push({ source: join(pkg, "node_modules"), target: `${KIT}/node_modules` });
  const parent = dirname(pkg);
  const hoisted = basename(parent) === "node_modules" ? parent : basename(dirname(parent)) === "node_modules" && basename(parent).startsWith("@") ? dirname(parent) : undefined;
  if (hoisted) roots.push({ source: hoisted, target: "/opt/node_modules" });
  return roots;
}

export function sandboxKit(agentMainOnHost: string, setprivPath: string): SandboxKit {
  const agentMain = realpathSync(agentMainOnHost);
  const pkg = packageRootOf(agentMain);
  const node = realpathSync(process.execPath);
  const libs = new Map<string, string>();
  let loader: string | undefined;
  for (const file of [node, setprivPath, ...nativeModules(pkg)]) {
    const parsed = parseLdd(ldd(file));
    for (const [name, path] of parsed.libs) libs.set(name, realpathSync(path));
    loader ??= parsed.loader && realpathSync(parsed.loader);
  }
  const ro = (source: string, target: string) => ["--ro-bind", source, target];
  const binds = [
    ...ro(node, `${KIT}/bin/node`),
    ...ro(realpathSync(setprivPath), `${KIT}/bin/setpriv`),
    ...[...libs].flatMap(([name, path]) => ro(path, `${KIT_LIB}/${name}`)),
    ...ro(join(pkg, "package.json"), `${KIT}/package.json`),
    ...ro(join(pkg, "dist"), `${KIT}/dist`),
    ...dependencyRoots(pkg).flatMap((r) => ro(r.source, r.target)),
  ];
  const loaderInside = loader ? `${KIT_LIB}/${basename(loader)}` : undefined;
  if (loader) binds.push(...ro(loader, loaderInside!));
  // A static node (no loader) runs as is.
  const run = (binary: string) => (loaderInside ? [loaderInside, "--library-path", KIT_LIB, binary] : [binary]);
  const inPkg = relative(pkg, agentMain);
  let agentInside = `${KIT}/${inPkg}`;
  if (inPkg.startsWith("..")) {
    // A test's own agent script outside the package: bound beside the kit.
    binds.push(...ro(dirname(agentMain), `${KIT}/extra`));
    agentInside = `${KIT}/extra/${basename(agentMain)}`;
  }
  return {
    binds,
    loader: [...run(`${KIT}/bin/node`), ...AGENT_NODE_FLAGS],
    agentMain: agentInside,
    warmMain: `${KIT}/dist/simulator/launcher/warm-agent.js`,
    processWrapper: [...run(`${KIT}/bin/setpriv`), "--inh-caps=-all", "--bounding-set=-all", "--"],
  };
}
