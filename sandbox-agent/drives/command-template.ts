/**
 * Mount/unmount command templates for the `command` backend. A template is
 * an argv: either a JSON array (`["rclone","mount","remote:{driveName}{drivePath}","{mountPath}"]`)
 * or words separated by spaces. Placeholders are substituted inside each
 * argument after splitting, so a value containing spaces or shell syntax stays
 * one literal argument; nothing runs through a shell.
 */
export const PLACEHOLDERS = ["driveName", "drivePath", "mountPath", "readOnly"] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

export function parseCommandTemplate(raw: string): string[] {
  const text = raw.trim();
  let argv: unknown;
  if (text.startsWith("[")) {
    try {
      argv = JSON.parse(text);
    } catch (e) {
      throw new Error(`not a valid JSON array: ${(e as Error).message}`);
    }
    if (!Array.isArray(argv) || !argv.every((a) => typeof a === "string")) throw new Error("a JSON template must be an array of strings");
  } else {
    argv = text.split(/\s+/).filter((w) => w !== "");
  }
  const words = argv as string[];
  if (words.length === 0 || words[0] === "") throw new Error("the command is empty");
  for (const word of words) {
    for (const match of word.matchAll(/\{([^{}]*)\}/g)) {
      if (!(PLACEHOLDERS as readonly string[]).includes(match[1]!)) {
        throw new Error(`unknown placeholder {${match[1]}} (known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(" ")})`);
      }
    }
  }
  return words;
}

export function expandTemplate(template: readonly string[], values: Record<Placeholder, string>): string[] {
  return template.map((word) => word.replace(/\{(driveName|drivePath|mountPath|readOnly)\}/g, (_m, key: Placeholder) => values[key]));
}
