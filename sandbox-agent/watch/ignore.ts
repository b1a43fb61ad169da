import { globToRegExp, hasGlobSyntax, splitPatternList } from "../search/glob.js";

/**
 * `ignore=a,b`: each entry drops the events whose sandbox path contains it
 * (the reference's plain substring rule); an entry with glob syntax (`*.log`,
 * `**\/tmp/**`) is matched against the event's name or, with a `/`, its whole
 * path instead.
 */
export function compileIgnore(value: string): (sandboxPath: string) => boolean {
  const substrings: string[] = [];
  const globs: { re: RegExp; byPath: boolean }[] = [];
  for (const entry of splitPatternList(value)) {
    if (hasGlobSyntax(entry)) globs.push({ re: globToRegExp(entry), byPath: entry.includes("/") });
    else substrings.push(entry);
  }
  if (substrings.length === 0 && globs.length === 0) return () => false;
  return (sandboxPath) => {
    if (substrings.some((s) => sandboxPath.includes(s))) return true;
    if (globs.length === 0) return false;
    const name = sandboxPath.slice(sandboxPath.lastIndexOf("/") + 1);
    return globs.some((g) => g.re.test(g.byPath ? sandboxPath : name));
  };
}
