import { existsSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { hostExtraCertificates, imageFile, SANDBOX_CA_BUNDLE } from "./sandbox-setup.js";

/**
 * Every sandbox trusts the egress proxy's CA (simulator/egress/ca.ts), so
 * curl, Node, Python and git work through its interception without flags:
 * - the system store of an image-based sandbox (`/etc/ssl/certs/ca-certificates.crt`
 *   in its own layer, written before the overlay is mounted), which curl,
 *   git, apt and OpenSSL read by default;
 * - files in the agent's data dir (`/run/sandbox-agent/etc` inside, bwrap and
 *   docker alike) that the sandbox's environment names: a full bundle for
 *   SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and GIT_SSL_CAINFO,
 *   which replace the store rather than add to it (every sandbox:
 *   EGRESS_CA_TRUST_ENV); the CA alone for NODE_EXTRA_CA_CERTS (Node adds it
 *   to its own list) in a sandbox with a proxy configuration (EGRESS_TRUST_ENV),
 *   which on the platform alone has that variable. Elsewhere Node reads the
 *   bundle through NODE_OPTIONS=--use-openssl-ca (Node's own list ignores
 *   SSL_CERT_FILE), so https to the simulator's hosts (a preview's URL) works
 *   without the proxy too.
 */

export const EGRESS_CA_FILE = "/run/sandbox-agent/etc/egress-ca.crt";
export const EGRESS_BUNDLE_FILE = "/run/sandbox-agent/etc/ca-bundle.crt";

const BUNDLE_ENV: Record<string, string> = {
  SSL_CERT_FILE: EGRESS_BUNDLE_FILE,
  REQUESTS_CA_BUNDLE: EGRESS_BUNDLE_FILE,
  CURL_CA_BUNDLE: EGRESS_BUNDLE_FILE,
  GIT_SSL_CAINFO: EGRESS_BUNDLE_FILE,
};

/** A sandbox without a proxy configuration: the bundle, and Node pointed at it. */
export const EGRESS_CA_TRUST_ENV: Record<string, string> = { ...BUNDLE_ENV, NODE_OPTIONS: "--use-openssl-ca" };

/** A sandbox with one: the bundle, the CA for Node, and the CA git checks the proxy's own certificate with (HTTPS_PROXY is https://). */
export const EGRESS_TRUST_ENV: Record<string, string> = { ...BUNDLE_ENV, NODE_EXTRA_CA_CERTS: EGRESS_CA_FILE, GIT_PROXY_SSL_CAINFO: EGRESS_BUNDLE_FILE };

/** The trust files in the agent's data dir (`<dataDir>/etc`), from the system bundle the sandbox sees (`systemBundle`, read on the host). */
export function writeTrustFiles(dataDir: string, caPem: string, systemBundle: string): void {
  const dir = join(dataDir, "etc");
  mkdirSync(dir, { recursive: true });
  const extras = hostExtraCertificates();
  writeFileSync(join(dir, "egress-ca.crt"), `${caPem.trim()}\n${extras}`, { mode: 0o644 });
  const base = readBundle(systemBundle);
  writeFileSync(join(dir, "ca-bundle.crt"), withCertificate(withCertificate(base, extras), caPem), { mode: 0o644 });
}

/** Before the overlay is mounted: the sandbox's layer gets its image's bundle (or the one it already has) plus the CA. */
export function trustInImage(imageLayers: string[], upper: string, caPem: string): void {
  const target = join(upper, SANDBOX_CA_BUNDLE);
  const current = existsSync(target)
    ? readBundle(target)
    : withCertificate(readBundle(imageFile(imageLayers, SANDBOX_CA_BUNDLE) ?? ""), hostExtraCertificates());
  if (current.includes(caPem.trim())) return;
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, withCertificate(current, caPem), { mode: 0o644 });
}

/** The image's (or host's) bundle, "" when it is missing or a link (which would resolve against the host here). */
export function readBundle(path: string): string {
  try {
    return lstatSync(path).isFile() ? readFileSync(path, "utf8") : "";
  } catch {
    return "";
  }
}

function withCertificate(bundle: string, pem: string): string {
  if (!pem.trim() || bundle.includes(pem.trim())) return bundle;
  return `${bundle.trimEnd()}${bundle.trim() ? "\n" : ""}${pem.trim()}\n`;
}
