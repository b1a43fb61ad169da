import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { constants, promises as fsp, type Stats } from "node:fs";
import { z } from "zod";
import { errors, fromFsError } from "../../src/errors.js";
import { fileEntry, listDirectory } from "../filesystem/entries.js";
import { parsePermissions } from "../filesystem/permissions.js";
import { removeDirectory } from "../filesystem/remove.js";
import { MAX_JSON_READ_BYTES } from "../filesystem/routes.js";
import { writeDirectory, writeFile } from "../filesystem/write.js";
import { DirectorySchema, FileSchema, toolResult, WORKING_DIRECTORY, type ToolContext } from "./context.js";

const PathMessage = z.object({ path: z.string(), message: z.string() });

/** A tool path: absolute, or relative to the working directory; always confined under --root. */
/** A tool's path argument as a sandbox path: relative ones are under the working directory. */
export function toolPath(ctx: ToolContext, raw: string): string {
  return ctx.paths.normalize(raw.startsWith("/") ? raw : `${WORKING_DIRECTORY}/${raw}`);
}

/**
 * Reads a file through its pinned descriptor (resolved beneath the root once, as the filesystem routes
 * read): a directory swapped for a link between the check and the read cannot send it outside the root.
 */
export async function readPinned(ctx: ToolContext, path: string, check?: (stat: Stats) => void): Promise<{ stat: Stats; content: string }> {
  return ctx.paths.use(path, { follow: true }, async (target) => {
    if (!target.pinned) throw errors.notFound(`${path}: no such file or directory`);
    const handle = await fsp.open(target.pinned, constants.O_RDONLY).catch((err) => {
      throw fromFsError(err, "cannot read", path);
    });
    try {
      const stat = await handle.stat();
      check?.(stat);
      const content = await handle.readFile("utf8").catch((err) => {
        throw fromFsError(err, "cannot read", path);
      });
      return { stat, content };
    } finally {
      await handle.close();
    }
  });
}

/** Lists through the directory's pinned descriptor, as GET /filesystem does (no swap between check and listing). */
export async function listTool(ctx: ToolContext, raw: string) {
  const path = toolPath(ctx, raw);
  return ctx.paths.use(path, { follow: true }, async ({ stat, pinned }) => {
    if (!stat || !pinned) throw errors.notFound(`cannot list ${path}: no such file or directory (ENOENT)`);
    if (!stat.isDirectory()) throw errors.badRequest(`${path} is not a directory`);
    return listDirectory(path, pinned, ctx.owners).catch((err) => {
      throw fromFsError(err, "cannot list", path);
    });
  });
}

/** The reference's filesystem tools (§9.11): the same operations as /filesystem, for MCP clients. */
export function registerFsTools(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    "fsGetWorkingDirectory",
    {
      description: "Get the working directory relative paths are resolved from.",
      inputSchema: z.object({}).strict(),
      outputSchema: z.object({ path: z.string() }),
    },
    async () => toolResult({ path: WORKING_DIRECTORY }),
  );

  server.registerTool(
    "fsListDirectory",
    {
      description: "List the files and subdirectories of a directory (one level).",
      inputSchema: z.object({ path: z.string().describe("Directory path, absolute or relative to the working directory") }).strict(),
      outputSchema: z.object({ directory: DirectorySchema }),
    },
    async ({ path }) => toolResult({ directory: await listTool(ctx, path) }),
  );

  server.registerTool(
    "fsReadFile",
    {
      description: "Read a text file with its metadata.",
      inputSchema: z.object({ path: z.string().describe("File path") }).strict(),
      outputSchema: FileSchema.extend({ content: z.string() }),
    },
    async ({ path: raw }) => {
      const path = toolPath(ctx, raw);
      const { stat, content } = await readPinned(ctx, path, (stat) => {
        if (stat.isDirectory()) throw errors.badRequest(`${path} is a directory: use fsListDirectory`);
        if (stat.size > MAX_JSON_READ_BYTES) throw errors.payloadTooLarge(`${path} is ${stat.size} bytes, too large to read here`);
      });
      return toolResult({ ...fileEntry(path, stat, ctx.owners), content });
    },
  );

  server.registerTool(
    "fsWriteFile",
    {
      description: "Create or replace a file (atomically), or create a directory with isDirectory. Parent directories are created.",
      inputSchema: z
        .object({
          path: z.string().describe("File or directory path"),
          content: z.string().optional().describe("File content"),
          permissions: z.string().optional().describe("Octal mode such as 0644 (default 0644 for files, 0755 for directories)"),
          isDirectory: z.boolean().optional().describe("Create a directory instead of a file"),
        })
        .strict(),
      outputSchema: PathMessage,
    },
    async ({ path: raw, content, permissions, isDirectory }) => {
      const path = toolPath(ctx, raw);
      if (path === "/") throw errors.badRequest("cannot write the sandbox root");
      // Written through a pinned path, like PUT /filesystem (no swap between check and use can escape the root).
      if (isDirectory) {
        await ctx.paths.use(path, { follow: true, createParents: true }, (target) => writeDirectory(target, parsePermissions(permissions, 0o755)));
        return toolResult({ path: raw, message: "Directory created successfully" });
      }
      await ctx.paths.use(path, { follow: true, createParents: true }, (target) =>
        writeFile(target, content ?? "", permissions === undefined ? undefined : parsePermissions(permissions, 0o644)),
      );
      return toolResult({ path: raw, message: "File created/updated successfully" });
    },
  );

  server.registerTool(
    "fsEditFile",
    {
      description: "Replace an exact string in a file: once (the string must occur exactly once) or everywhere with replaceAll.",
      inputSchema: z
        .object({
          path: z.string().describe("File path"),
          oldString: z.string().describe("Exact text to replace"),
          newString: z.string().describe("Replacement text"),
          replaceAll: z.boolean().optional().describe("Replace every occurrence (default false)"),
        })
        .strict(),
      outputSchema: z.object({ path: z.string(), occurrencesReplaced: z.number() }),
    },
    async ({ path: raw, oldString, newString, replaceAll }) => {
      if (oldString === "") throw errors.badRequest("oldString must not be empty");
      if (oldString === newString) throw errors.badRequest("oldString and newString are identical: nothing to change");
      const path = toolPath(ctx, raw);
      const { content: text } = await readPinned(ctx, path);
      const parts = text.split(oldString);
      const found = parts.length - 1;
      if (found === 0) throw errors.badRequest(`oldString not found in ${path}`);
      if (found > 1 && !replaceAll)
        throw errors.badRequest(`oldString found ${found} times in ${path}: include more context to make it unique, or set replaceAll`);
      await ctx.paths.use(path, { follow: true }, (target) => writeFile(target, parts.join(newString)));
      return toolResult({ path: raw, occurrencesReplaced: found });
    },
  );

  server.registerTool(
    "fsDeleteFileOrDirectory",
    {
      description: "Delete a file, or a directory (recursive for a non-empty one).",
      inputSchema: z
        .object({
          path: z.string().describe("Path to delete"),
          isDirectory: z.boolean().optional().describe("Expect a directory (detected when absent)"),
          recursive: z.boolean().optional().describe("Delete a directory with its content (default false)"),
        })
        .strict(),
      outputSchema: PathMessage,
    },
    async ({ path: raw, isDirectory, recursive }) => {
      const path = toolPath(ctx, raw);
      if (path === "/") throw errors.forbidden("cannot delete the sandbox root");
      // Through the pinned entry, like DELETE /filesystem: a recursive delete walks held descriptors (filesystem/remove.ts).
      return ctx.paths.use(path, { follow: false }, async ({ stat, dir, name, entryPath }) => {
        if (!stat) throw errors.notFound(`cannot delete ${path}: no such file or directory (ENOENT)`);
        if (isDirectory === true && !stat.isDirectory()) throw errors.badRequest(`${path} is not a directory`);
        if (isDirectory === false && stat.isDirectory()) throw errors.badRequest(`${path} is a directory`);
        if (stat.isDirectory()) {
          if (recursive) await removeDirectory({ dir, name }, path, true);
          else {
            await fsp.rmdir(entryPath).catch((err) => {
              if ((err as NodeJS.ErrnoException).code === "ENOTEMPTY") throw errors.conflict(`cannot delete ${path}: directory not empty (set recursive)`);
              throw fromFsError(err, "cannot delete", path);
            });
          }
          return toolResult({ path: raw, message: "Directory deleted successfully" });
        }
        await fsp.unlink(entryPath).catch((err) => {
          throw fromFsError(err, "cannot delete", path);
        });
        return toolResult({ path: raw, message: "File deleted successfully" });
      });
    },
  );
}
