import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { posix } from "node:path";
import { z } from "zod";
import { errors } from "../../src/errors.js";
import { DirectorySchema, toolResult, WORKING_DIRECTORY, type ToolContext } from "./context.js";
import { listTool, readPinned, toolPath } from "./fs-tools.js";
import { globMatcher, isSubsequence, openEntry, walk } from "./search.js";

const FILE_SEARCH_MAX = 10; // reference: at most 10 paths
const WALK_MAX_ENTRIES = 200_000;
const GREP_MAX_MATCHES = 1_000;
const GREP_MAX_FILE_BYTES = 8 * 1024 * 1024;
const GREP_MAX_OUTPUT_BYTES = 4 * 1024 * 1024;

/** The tools that need an outside model (the reference calls Relace or Morph): a clear error, never a fake answer. */
const MODEL_TOOLS: [string, string, z.ZodObject][] = [
  [
    "codegenEditFile",
    "Apply an edit sketch to a file with a fast-apply model.",
    z.object({ targetFile: z.string(), instructions: z.string(), codeEdit: z.string() }).strict(),
  ],
  [
    "codegenRerank",
    "Rank files by relevance to a query with a reranking model.",
    z
      .object({
        path: z.string(),
        query: z.string(),
        scoreThreshold: z.number().optional(),
        tokenLimit: z.number().int().optional(),
        filePattern: z.string().optional(),
      })
      .strict(),
  ],
  ["codegenCodebaseSearch", "Semantic search of the codebase.", z.object({ query: z.string(), targetDirectories: z.array(z.string()).optional() }).strict()],
  ["codegenReapply", "Re-apply the last edit with a smarter model.", z.object({ targetFile: z.string() }).strict()],
  [
    "codegenParallelApply",
    "Apply one edit plan to several regions in parallel.",
    z
      .object({
        editPlan: z.string(),
        editRegions: z.array(
          z.object({ relativeWorkspacePath: z.string(), startLine: z.number().int().optional(), endLine: z.number().int().optional() }).strict(),
        ),
      })
      .strict(),
  ],
];

function needsModel(tool: string): never {
  throw errors.unprocessable(
    `${tool} needs an outside code model (the platform uses Relace or Morph, configured with RELACE_API_KEY or MORPH_API_KEY); sandbox-agent has none, so this tool is unavailable`,
  );
}

/** One line of `rg --json` output (what the reference's codegenGrepSearch returns verbatim). */
function rgLine(type: string, data: object): string {
  return `${JSON.stringify({ type, data })}\n`;
}

/** Runs `fn` on a tool's directory held open (its pinned `/proc/self/fd` path): walks start from descriptors, never host paths. */
async function inToolDirectory<T>(ctx: ToolContext, raw: string, fn: (path: string, pinned: string) => Promise<T>): Promise<T> {
  const path = toolPath(ctx, raw);
  return ctx.paths.use(path, { follow: true }, async ({ pinned, stat }) => {
    if (!pinned || !stat) throw errors.notFound(`${path}: no such directory`);
    if (!stat.isDirectory()) throw errors.badRequest(`${path} is not a directory`);
    return fn(path, pinned);
  });
}

/** A file of a walk, up to GREP_MAX_FILE_BYTES + 1 bytes (more: skipped), or undefined (gone, a link, unreadable). */
async function readEntry(host: string): Promise<Buffer | undefined> {
  const handle = await openEntry(host).catch(() => undefined);
  if (!handle) return undefined;
  try {
    const stat = await handle.stat();
    if (!stat.isFile() || stat.size > GREP_MAX_FILE_BYTES) return undefined;
    return await handle.readFile();
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

/** The reference's codegen tools (§9.11): the local ones for real, the model ones as clear errors. */
export function registerCodegenTools(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    "codegenFileSearch",
    {
      description: "Find files whose name contains the query's characters in order (case-insensitive); at most 10 paths.",
      inputSchema: z
        .object({
          query: z.string().min(1).describe("Fuzzy file name"),
          directory: z.string().optional().describe("Directory to search (default: the working directory)"),
        })
        .strict(),
      outputSchema: z.object({ success: z.boolean(), matches: z.array(z.string()).nullable(), query: z.string() }),
    },
    async ({ query, directory }) => {
      const matches: string[] = [];
      await inToolDirectory(ctx, directory ?? WORKING_DIRECTORY, (path, pinned) =>
        walk(pinned, { maxEntries: WALK_MAX_ENTRIES, skipHidden: true, sandboxStart: path }, (e) => {
          if (e.kind === "file" && isSubsequence(query, e.name)) matches.push(posix.join(path, e.rel));
          return matches.length < FILE_SEARCH_MAX;
        }),
      );
      return toolResult({ success: true, matches: matches.length ? matches : null, query });
    },
  );

  server.registerTool(
    "codegenGrepSearch",
    {
      description: "Search file contents with a regular expression (ripgrep's --json output). Hidden files and build/vendor directories are skipped.",
      inputSchema: z
        .object({
          query: z.string().min(1).describe("Regular expression"),
          caseSensitive: z.boolean().optional().describe("Match case (default false)"),
          includePattern: z.string().optional().describe("Glob of files to search, e.g. *.ts"),
          excludePattern: z.string().optional().describe("Glob of files to skip"),
        })
        .strict(),
      outputSchema: z.object({ success: z.boolean(), results: z.string() }),
    },
    async ({ query, caseSensitive, includePattern, excludePattern }) => {
      let re: RegExp;
      try {
        re = new RegExp(query, caseSensitive ? "g" : "gi");
      } catch (err) {
        throw errors.badRequest(`invalid regular expression: ${(err as Error).message}`);
      }
      const include = includePattern ? globMatcher(includePattern) : undefined;
      const exclude = excludePattern ? globMatcher(excludePattern) : undefined;
      let out = "";
      let matches = 0;
      let filesWithMatch = 0;
      let searched = 0;
      await inToolDirectory(ctx, WORKING_DIRECTORY, (path, pinned) =>
        walk(pinned, { maxEntries: WALK_MAX_ENTRIES, skipHidden: true, sandboxStart: path }, async (e) => {
          if (e.kind !== "file" || (include && !include(e.rel)) || (exclude && exclude(e.rel))) return true;
          const data = await readEntry(e.host);
          if (!data || data.length > GREP_MAX_FILE_BYTES || data.subarray(0, 8192).includes(0)) return true; // binary: skipped, as rg does
          searched++;
          let found = 0;
          let offset = 0;
          let lineNumber = 0;
          for (const line of data.toString("utf8").split(/(?<=\n)/)) {
            lineNumber++;
            re.lastIndex = 0;
            const subs = [...line.matchAll(re)]
              .filter((m) => m[0] !== "")
              .map((m) => ({
                match: { text: m[0] },
                start: Buffer.byteLength(line.slice(0, m.index)),
                end: Buffer.byteLength(line.slice(0, m.index + m[0].length)),
              }));
            if (subs.length > 0) {
              if (found++ === 0) out += rgLine("begin", { path: { text: e.rel } });
              out += rgLine("match", { path: { text: e.rel }, lines: { text: line }, line_number: lineNumber, absolute_offset: offset, submatches: subs });
              matches++;
            }
            offset += Buffer.byteLength(line);
            if (matches >= GREP_MAX_MATCHES || out.length > GREP_MAX_OUTPUT_BYTES) break;
          }
          if (found > 0) {
            filesWithMatch++;
            out += rgLine("end", { path: { text: e.rel }, binary_offset: null, stats: { matched_lines: found, matches: found } });
          }
          return matches < GREP_MAX_MATCHES && out.length <= GREP_MAX_OUTPUT_BYTES;
        }),
      );
      // rg exits 1 when nothing matched; the reference reports that as a tool error.
      if (matches === 0) throw errors.notFound("grep search failed: exit status 1 (no match)");
      out += rgLine("summary", { stats: { matched_lines: matches, matches, searches: searched, searches_with_match: filesWithMatch } });
      return toolResult({ success: true, results: out });
    },
  );

  server.registerTool(
    "codegenReadFileRange",
    {
      description: "Read lines start..end (1-based, inclusive) of a text file.",
      inputSchema: z
        .object({
          targetFile: z.string().describe("File path"),
          startLineOneIndexed: z.number().int().describe("First line, from 1"),
          endLineOneIndexedInclusive: z.number().int().describe("Last line, inclusive"),
        })
        .strict(),
      outputSchema: z.object({ success: z.boolean(), content: z.string(), file: z.string() }),
    },
    async ({ targetFile, startLineOneIndexed: start, endLineOneIndexedInclusive: end }) => {
      const path = toolPath(ctx, targetFile);
      const { content: text } = await readPinned(ctx, path);
      const lines = text.split("\n");
      if (text.endsWith("\n")) lines.pop();
      if (start < 1 || end < start || end > lines.length) throw errors.badRequest(`invalid line range ${start}-${end}: ${path} has ${lines.length} lines`);
      return toolResult({ success: true, content: lines.slice(start - 1, end).join("\n"), file: targetFile });
    },
  );

  server.registerTool(
    "codegenListDir",
    {
      description: "List a directory (one level).",
      inputSchema: z.object({ relativeWorkspacePath: z.string().describe("Directory, relative to the working directory or absolute") }).strict(),
      outputSchema: z.object({ success: z.boolean(), directory: DirectorySchema }),
    },
    async ({ relativeWorkspacePath }) => toolResult({ success: true, directory: await listTool(ctx, relativeWorkspacePath) }),
  );

  for (const [name, description, inputSchema] of MODEL_TOOLS) {
    server.registerTool(name, { description: `${description} Needs an outside model: unavailable in sandbox-agent.`, inputSchema }, async () =>
      needsModel(name),
    );
  }
}
