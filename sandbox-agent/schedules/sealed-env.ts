import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { closeSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { isErrno } from "../../src/errors.js";

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const PREFIX = "v1:";

/**
 * Schedule env values at rest: AES-256-GCM (node:crypto) over
 * the env object, so a copy of agent.db reveals no secret. The key is a file
 * of 32 random bytes, 0600, created on first use; by default it sits in the
 * data dir, which the API refuses to reach even when the data dir lies under
 * --root; --secrets-key-file puts it anywhere else.
 */
export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== KEY_BYTES) throw new Error(`a secrets key must be ${KEY_BYTES} bytes, got ${key.length}`);
    this.#key = key;
  }

  /** Reads the key file, creating it (O_EXCL, 0600) when it does not exist. */
  static fromKeyFile(path: string): SecretBox {
    try {
      return new SecretBox(readFileSync(path));
    } catch (err) {
      if (!isErrno(err, "ENOENT")) throw new Error(`cannot read the secrets key ${path}: ${(err as Error).message}`);
    }
    mkdirSync(dirname(path), { recursive: true });
    const key = randomBytes(KEY_BYTES);
    const fd = openSync(path, "wx", 0o600);
    try {
      writeSync(fd, key);
    } finally {
      closeSync(fd);
    }
    return new SecretBox(key);
  }

  seal(plain: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const data = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), data]).toString("base64");
  }

  open(sealed: string): string {
    if (!sealed.startsWith(PREFIX)) throw new Error("not a sealed value");
    const raw = Buffer.from(sealed.slice(PREFIX.length), "base64");
    const decipher = createDecipheriv("aes-256-gcm", this.#key, raw.subarray(0, IV_BYTES));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8");
  }
}

type Input = { env?: Record<string, string> | { $sealed: string } } & Record<string, unknown>;

/** A schedule's `input` JSON with its env sealed (as stored). Inputs without env values stay as they are. */
export function sealInput(box: SecretBox | undefined, inputJson: string): string {
  if (!box) return inputJson;
  const input = JSON.parse(inputJson) as Input;
  if (!input.env || "$sealed" in input.env || Object.keys(input.env).length === 0) return inputJson;
  return JSON.stringify({ ...input, env: { $sealed: box.seal(JSON.stringify(input.env)) } });
}

/** The stored `input` JSON with its env opened again (what the rest of the agent works with). */
export function openInput(box: SecretBox | undefined, inputJson: string): string {
  const input = JSON.parse(inputJson) as Input;
  if (!input.env || !("$sealed" in input.env)) return inputJson;
  if (!box) throw new Error("a schedule's env is sealed but the agent has no secrets key");
  return JSON.stringify({ ...input, env: JSON.parse(box.open(input.env.$sealed as string)) as Record<string, string> });
}

/** Whether a stored input still holds env values in clear (rows written before sealing existed). */
export function hasClearEnv(inputJson: string): boolean {
  const input = JSON.parse(inputJson) as Input;
  return Boolean(input.env && !("$sealed" in input.env) && Object.keys(input.env).length > 0);
}
