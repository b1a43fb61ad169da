import { execFileSync } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join, relative } from "node:path";
import { AGENT_NODE_FLAGS, packageRootOf } from "./agent-main.js";

/**
 * The agent as every isolated sandbox gets it: the host's node binary, the
 * shared libraries it needs and their dynamic loader, util-linux's setpriv
 * (to start commands with a bounded set of capabilities), mount and umount
 * (the agent's drives: nothing the agent runs comes from the user's image,
 * which may have none of them) and this package, all bound
 * read-only under /opt/sandbox-kit, never copied into the image. Node starts
 * through the kit's own loader with --library-path, so it runs whatever libc
 * the image has (or none: a tiny test image works).
 */

export const KIT = "/opt/sandbox-kit";

/**
 * What root's commands may do inside the sandbox: Docker's default set, each
 * of the sandbox's own user namespace (over its own ids and namespaces, never
 * the host's). Enough for chown, tar -p, useradd, su/setpriv and apt-get as on
 * a machine; no CAP_SYS_ADMIN (no mounts: the agent's drives and the
 * sandbox's binds stay as they are), NET_ADMIN, SYS_PTRACE or SYS_MODULE.
 */
export const COMMAND_CAPABILITIES = [
  "chown",
  "dac_override",
  "fowner",
  "fsetid",
  "kill",
  "setgid",
  "setuid",
  "setpcap",
  "setfcap",
  "net_bind_service",
  "net_raw",
  "sys_chroot",
  "mknod",
  "audit_write",
] as const;
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
  /** Argv prefix the agent starts every command through: COMMAND_CAPABILITIES at most, none inheritable, nothing more regainable. */
  processWrapper: string[];
  /** Argv prefixes of the kit's mount(8) and umount(8) (the agent's --mount-program, --umount-program). */
  mountProgram: string[];
  umountProgram: string[];
  /** The one process of a sandbox the agent host serves (native/nsexec --idle), or [] where nsexec is not built. */
  idle: string[];
}

/** The host's util-linux programs the kit carries. */
export interface KitPrograms {
  setpriv: string;
  mount: string;
  umount: string;
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
  const hoisted =
    basename(parent) === "node_modules"
      ? parent
      : basename(dirname(parent)) === "node_modules" && basename(parent).startsWith("@")
        ? dirname(parent)
        : undefined;
  if (hoisted) roots.push({ source: hoisted, target: "/opt/node_modules" });
  return roots;
}

export function sandboxKit(agentMainOnHost: string, programs: KitPrograms, nsexec?: string): SandboxKit {
  const agentMain = realpathSync(agentMainOnHost);
  const pkg = packageRootOf(agentMain);
  const node = realpathSync(process.execPath);
  const libs = new Map<string, string>();
  let loader: string | undefined;
  const tools = [programs.setpriv, programs.mount, programs.umount].map((p) => realpathSync(p));
  for (const file of [node, ...tools, ...nativeModules(pkg)]) {
    const parsed = parseLdd(ldd(file));
    for (const [name, path] of parsed.libs) libs.set(name, realpathSync(path));
    loader ??= parsed.loader && realpathSync(parsed.loader);
  }
  const ro = (source: string, target: string) => ["--ro-bind", source, target];
  const binds = [
    ...ro(node, `${KIT}/bin/node`),
    ...ro(tools[0]!, `${KIT}/bin/setpriv`),
    ...ro(tools[1]!, `${KIT}/bin/mount`),
    ...ro(tools[2]!, `${KIT}/bin/umount`),
    ...[...libs].flatMap(([name, path]) => ro(path, `${KIT_LIB}/${name}`)),
    ...ro(join(pkg, "package.json"), `${KIT}/package.json`),
    ...ro(join(pkg, "dist"), `${KIT}/dist`),
    ...dependencyRoots(pkg).flatMap((r) => ro(r.source, r.target)),
  ];
  // nsexec is linked statically where the C library allows; a dynamic one needs only libc, which node's libraries hold.
  const nsexecStatic = nsexec !== undefined && parseLdd(ldd(nsexec)).loader === undefined;
  if (nsexec) binds.push(...ro(realpathSync(nsexec), `${KIT}/bin/nsexec`));
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
    processWrapper: [...run(`${KIT}/bin/setpriv`), "--inh-caps=-all", `--bounding-set=-all,${COMMAND_CAPABILITIES.map((c) => `+${c}`).join(",")}`, "--"],
    mountProgram: run(`${KIT}/bin/mount`),
    umountProgram: run(`${KIT}/bin/umount`),
    idle: nsexec ? [...(nsexecStatic ? [`${KIT}/bin/nsexec`] : run(`${KIT}/bin/nsexec`)), "--idle"] : [],
  };
}
