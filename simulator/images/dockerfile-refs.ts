/**
 * The images a Dockerfile names outside itself — `FROM <image>` and
 * `COPY --from=<image>` that are not earlier stages — so the simulator can
 * make them available to the builder before it runs (template-build.ts).
 * Only a scan for those names: the builder (docker build, buildah) reads and
 * runs the Dockerfile, including its errors. Variables in names are
 * substituted from --build-arg values and the ARG defaults given before the
 * first FROM, as the builders do (`FROM ghcr.io/blaxel-ai/sandbox:${SANDBOX_VERSION}`).
 */

/** The Dockerfile's instructions: continuation lines joined, comments and blank lines dropped. */
function instructions(text: string): string[] {
  const out: string[] = [];
  let pending = "";
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!pending && (line === "" || line.startsWith("#"))) continue;
    if (pending && line.startsWith("#")) continue; // comments inside a continued instruction
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    out.push(pending + line);
    pending = "";
  }
  if (pending) out.push(pending);
  return out;
}

function substitute(word: string, vars: Map<string, string>): string {
  return word.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (_m, braced: string | undefined, fallback: string | undefined, bare: string | undefined) => {
      const value = vars.get((braced ?? bare)!);
      return value !== undefined && value !== "" ? value : (fallback ?? "");
    },
  );
}

/** `NAME=value` pairs of an ARG instruction (quotes removed). */
function argDefaults(rest: string): [string, string | undefined][] {
  return rest
    .split(/\s+/)
    .filter(Boolean)
    .map((pair) => {
      const eq = pair.indexOf("=");
      if (eq < 0) return [pair, undefined];
      return [pair.slice(0, eq), pair.slice(eq + 1).replace(/^(["'])(.*)\1$/, "$2")];
    });
}

/** The build-arg values by name (`K=V`; `K` alone: empty). */
function givenArgs(buildArgs: string[]): Map<string, string> {
  return new Map(buildArgs.map((a) => [a.slice(0, a.indexOf("=") < 0 ? a.length : a.indexOf("=")), a.includes("=") ? a.slice(a.indexOf("=") + 1) : ""]));
}

/**
 * The Dockerfile with the images of `renamed` (as externalImages names them, variables substituted) named
 * otherwise in its FROM and COPY/ADD --from: a pinned digest's image given to the builder under its plain name.
 */
export function renameImages(text: string, buildArgs: string[], renamed: Map<string, string>): string {
  const given = givenArgs(buildArgs);
  const vars = new Map<string, string>();
  let sawFrom = false;
  return text
    .split("\n")
    .map((line) => {
      const match = /^(\s*)([A-Za-z]+)(\s+)(.*)$/.exec(line);
      if (!match) return line;
      const keyword = match[2]!.toUpperCase();
      if (keyword === "ARG" && !sawFrom) for (const [name, value] of argDefaults(match[4]!)) vars.set(name, given.get(name) ?? value ?? "");
      if (keyword === "FROM") sawFrom = true;
      if (keyword !== "FROM" && keyword !== "COPY" && keyword !== "ADD") return line;
      let first = true;
      const words = match[4]!.split(/(\s+)/).map((word) => {
        if (/^\s+$/.test(word)) return word;
        if (keyword === "FROM") {
          if (word.startsWith("--") || !first) return word;
          first = false;
          return renamed.get(substitute(word, vars)) ?? word;
        }
        const from = /^--from=(.+)$/.exec(word);
        return from ? `--from=${renamed.get(substitute(from[1]!, vars)) ?? from[1]}` : word;
      });
      return `${match[1]}${match[2]}${match[3]}${words.join("")}`;
    })
    .join("\n");
}

/** External image names the Dockerfile uses, in order of first use. */
export function externalImages(text: string, buildArgs: string[] = []): string[] {
  const given = givenArgs(buildArgs);
  const vars = new Map<string, string>();
  const stages = new Set<string>();
  const images: string[] = [];
  const use = (name: string) => {
    if (name && name.toLowerCase() !== "scratch" && !stages.has(name.toLowerCase()) && !/^\d+$/.test(name) && !images.includes(name)) images.push(name);
  };
  let sawFrom = false;
  for (const instruction of instructions(text)) {
    const match = /^([A-Za-z]+)\s+(.*)$/.exec(instruction);
    if (!match) continue;
    const keyword = match[1]!.toUpperCase();
    const rest = match[2]!;
    if (keyword === "ARG" && !sawFrom) {
      for (const [name, value] of argDefaults(rest)) vars.set(name, given.get(name) ?? value ?? "");
    } else if (keyword === "FROM") {
      sawFrom = true;
      const words = rest.split(/\s+/).filter((w) => !w.startsWith("--"));
      const image = substitute(words[0] ?? "", vars);
      use(image);
      if (words[1]?.toUpperCase() === "AS" && words[2]) stages.add(words[2].toLowerCase());
    } else if (keyword === "COPY" || keyword === "ADD") {
      for (const flag of rest.split(/\s+/)) {
        const from = /^--from=(.+)$/.exec(flag);
        if (from) use(substitute(from[1]!, vars));
      }
    }
  }
  return images;
}
