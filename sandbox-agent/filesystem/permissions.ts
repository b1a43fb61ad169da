import { errors } from "../../src/errors.js";

/**
 * Permissions arrive as an octal string ("0644", "644", "0o755"), as the SDK
 * sends them. A JSON number is taken as the same digits written in octal
 * (644 → 0o644), since nobody means decimal 420 when typing 644.
 */
export function parsePermissions(value: unknown, fallback: number, field = "permissions"): number {
  if (value === undefined || value === null || value === "") return fallback;
  const text = String(value).trim().replace(/^0o/i, "");
  if (!/^[0-7]{1,4}$/.test(text)) throw errors.badRequest(`${field}: invalid permissions "${String(value)}": expected an octal mode such as "0644"`);
  return parseInt(text, 8);
}

/** 0o644 → "644", the listing format of the reference daemon. */
export function formatPermissions(mode: number): string {
  return (mode & 0o7777).toString(8);
}
