import { promises as fsp } from "node:fs";
import { z } from "zod";
import { errors, isErrno } from "../src/errors.js";

const MetadataDocument = z.object({
  generation: z.number().int().optional(),
  environment: z.record(z.string(), z.string()).optional(),
});

export interface ReloadResult {
  generation: number;
  /** Keys set by this reload. */
  applied: number;
  /** Keys an earlier reload set that this document no longer carries. */
  removed: number;
}

/**
 * The environment processes start with: the agent's own, overlaid by what
 * `POST /environment/reload` read from the platform's metadata document
 * (reference §9.10). Only processes spawned later see a change.
 */
export class SandboxEnvironment {
  readonly #base: NodeJS.ProcessEnv;
  readonly #metadataPath: string;
  #overlay: Record<string, string> = {};

  constructor(base: NodeJS.ProcessEnv, metadataPath: string) {
    this.#base = base;
    this.#metadataPath = metadataPath;
  }

  current(): NodeJS.ProcessEnv {
    return { ...this.#base, ...this.#overlay };
  }

  /** Reads `{generation, environment}`; 404 when the document is missing, 500 when it is unreadable or not that shape. */
  async reload(): Promise<ReloadResult> {
    let text: string;
    try {
      text = await fsp.readFile(this.#metadataPath, "utf8");
    } catch (err) {
      if (isErrno(err, "ENOENT")) throw errors.notFound(`metadata document ${this.#metadataPath} not found`);
      throw errors.internal(`cannot read the metadata document ${this.#metadataPath}: ${(err as Error).message}`);
    }
    let doc: z.infer<typeof MetadataDocument>;
    try {
      doc = MetadataDocument.parse(JSON.parse(text));
    } catch (err) {
      throw errors.internal(`invalid metadata document ${this.#metadataPath}: ${(err as Error).message.split("\n")[0]}`);
    }
    const next = doc.environment ?? {};
    const removed = Object.keys(this.#overlay).filter((k) => !(k in next)).length;
    this.#overlay = { ...next };
    return { generation: doc.generation ?? 0, applied: Object.keys(next).length, removed };
  }
}
