import { z } from "zod";

/**
 * Redirect URIs of OAuth clients (RFC 6749 §3.1.2): absolute http(s) URLs
 * without a fragment. Anything else (`javascript:`, `data:`, a relative or
 * unparsable value) is refused, never redirected to.
 */
export function redirectUriProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "not an absolute URL";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return `scheme "${url.protocol.slice(0, -1)}" is not http or https`;
  if (url.hash !== "" || value.includes("#")) return "a redirect URI has no fragment";
  return undefined;
}

export const redirectUriSchema = z.string().superRefine((value, ctx) => {
  const problem = redirectUriProblem(value);
  if (problem) ctx.addIssue({ code: "custom", message: `redirect URI ${JSON.stringify(value)}: ${problem}` });
});
