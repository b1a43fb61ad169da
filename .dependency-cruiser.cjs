/**
 * The house's layering (docs/simulator.md, "Layers"): which folder may import which. `npm run check:layers`
 * (part of `npm test`) fails on an import against it, as `check:circles` fails on a circle.
 *
 * Each tree's folders are listed in bands, lowest first. A file may import its own folder and any folder of a
 * lower band, never a folder of its own band or a higher one. The trees themselves are layered the same way:
 * src/ (shared) at the bottom, then sandbox-agent/, then simulator/ (which runs agents), then the tools on top.
 */

/** simulator/, lowest band first. "." is a file at the simulator's root (those named; the rest is the composition root). */
const SIMULATOR = [
  ["config.ts", "clock.ts"],
  ["store"],
  ["auth"],
  ["http"],
  ["agent-host"],
  ["metrics", "launcher"],
  ["resources"],
  ["proxy"],
  ["previews", "egress", "standby"],
  ["images"],
  ["agents"],
  ["jobs", "schedules"],
  ["sandboxes"],
  ["accounts"],
  ["test-hooks", "console"],
  ["<root>"],
];

/** sandbox-agent/, lowest band first. */
const AGENT = [
  ["version.ts", "zod-jitless.ts", "environment.ts", "data-dir-lock.ts", "config-options.ts"],
  ["http", "paths"],
  ["filesystem", "search", "ports"],
  ["process"],
  ["network", "schedules", "terminal", "drives", "system"],
  ["multipart", "watch", "mcp"],
  ["<root>"],
];

const escape = (s) => s.replace(/[.]/g, "\\.");

/** The path pattern of one entry of a band: a folder, a root file, or (<root>) every other root file. */
function pattern(tree, entry, bands) {
  if (entry === "<root>") {
    const named = bands.flat().filter((e) => e.endsWith(".ts"));
    return `^${tree}/(?!(${named.map(escape).join("|")})$)[^/]+$`;
  }
  return entry.endsWith(".ts") ? `^${tree}/${escape(entry)}$` : `^${tree}/${entry}/`;
}

/** One rule per entry: it may not import an entry of its own band (but itself) or of a higher one. */
function layerRules(tree, bands) {
  const rules = [];
  bands.forEach((band, level) => {
    for (const entry of band) {
      const above = bands
        .slice(level)
        .flat()
        .filter((e) => e !== entry);
      if (above.length === 0) continue;
      rules.push({
        name: `${tree}-layers`,
        comment: `${tree}/${entry} may import only lower bands of ${tree}/ (see .dependency-cruiser.cjs)`,
        severity: "error",
        from: { path: pattern(tree, entry, bands) },
        to: { path: above.map((e) => pattern(tree, e, bands)) },
      });
    }
  });
  return rules;
}

/** The trees: src/ at the bottom, the tools on top (console/tools and bench/ may import anything). */
const TREES = [
  { from: "^src/", to: "^(sandbox-agent|simulator|console|bench)/" },
  { from: "^sandbox-agent/", to: "^(simulator|console|bench)/" },
  { from: "^simulator/", to: "^(console|bench)/" },
  { from: "^console/src/", to: "^(simulator|sandbox-agent|bench)/" },
];

module.exports = {
  forbidden: [
    { name: "no-circular", severity: "error", from: {}, to: { circular: true } },
    ...TREES.map(({ from, to }) => ({
      name: "tree-layers",
      comment: "a lower tree may not import a higher one (src < sandbox-agent < simulator < console/tools, bench)",
      severity: "error",
      from: { path: from },
      to: { path: to },
    })),
    ...layerRules("simulator", SIMULATOR),
    ...layerRules("sandbox-agent", AGENT),
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(node_modules|dist|test)/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"], extensions: [".ts", ".tsx", ".js"] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
