import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { createSecureContext, type SecureContext } from "node:tls";
import forge from "node-forge";

/**
 * The certificate authority the egress proxy signs its per-host certificates
 * with (node-forge's X.509), made once: kept in `dir` (beside the simulator's
 * data, mode 0600) so sandboxes of later runs still trust it, or once per
 * process when there is no directory (simulators in one process, as in
 * tests, share it). Keys come from Node's own generator (OpenSSL); every host
 * certificate shares one key made per process, so a new host costs a
 * signature, not a key (an RSA key takes up to a second on a busy machine).
 */

const CA_SUBJECT = [
  { name: "commonName", value: "sandbox-kit egress CA" },
  { name: "organizationName", value: "sandbox-kit simulator" },
];
const HOST_CACHE = 1_000;
const DAY_MS = 86_400_000;

export class EgressCa {
  readonly certPem: string;
  private readonly caKey: forge.pki.rsa.PrivateKey;
  private readonly caCert: forge.pki.Certificate;
  private readonly leafKeyPem: string;
  private readonly leafPublic: forge.pki.rsa.PublicKey;
  private readonly contexts = new Map<string, SecureContext>();

  constructor(
    dir: string | undefined,
    private readonly now: () => number = Date.now,
  ) {
    const stored = dir ? loadCa(dir) : undefined;
    const ca = stored ?? (dir ? makeCa(now()) : (processCa ??= makeCa(now())));
    if (dir && !stored) saveCa(dir, ca);
    this.certPem = ca.certPem;
    this.caKey = forge.pki.privateKeyFromPem(ca.keyPem) as forge.pki.rsa.PrivateKey;
    this.caCert = forge.pki.certificateFromPem(ca.certPem);
    const leaf = (leafKey ??= rsaKeyPair());
    this.leafKeyPem = leaf.keyPem;
    this.leafPublic = forge.pki.publicKeyFromPem(leaf.publicPem) as forge.pki.rsa.PublicKey;
  }

  /** A TLS context presenting a certificate for `host` signed by this CA (cached). */
  contextFor(host: string): SecureContext {
    const name = host.toLowerCase();
    let context = this.contexts.get(name);
    if (context) return context;
    context = createSecureContext({ key: this.leafKeyPem, cert: `${this.hostCertificate(name)}${this.certPem}` });
    if (this.contexts.size >= HOST_CACHE) this.contexts.delete(this.contexts.keys().next().value!);
    this.contexts.set(name, context);
    return context;
  }

  private hostCertificate(host: string): string {
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.leafPublic;
    cert.serialNumber = serial();
    cert.validity.notBefore = new Date(this.now() - DAY_MS);
    cert.validity.notAfter = new Date(this.now() + 365 * DAY_MS);
    cert.setSubject([{ name: "commonName", value: host.slice(0, 64) }]);
    cert.setIssuer(this.caCert.subject.attributes);
    cert.setExtensions([
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: [isIP(host) ? { type: 7, ip: host } : { type: 2, value: host }] },
      { name: "authorityKeyIdentifier", keyIdentifier: this.caCert.generateSubjectKeyIdentifier().getBytes() },
    ]);
    cert.sign(this.caKey, forge.md.sha256.create());
    return forge.pki.certificateToPem(cert);
  }
}

let processCa: CaFiles | undefined;
let leafKey: { keyPem: string; publicPem: string } | undefined;

interface CaFiles {
  certPem: string;
  keyPem: string;
}

function makeCa(nowMs: number): CaFiles {
  const pair = rsaKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(pair.publicPem);
  cert.serialNumber = serial();
  cert.validity.notBefore = new Date(nowMs - DAY_MS);
  cert.validity.notAfter = new Date(nowMs + 10 * 365 * DAY_MS);
  cert.setSubject(CA_SUBJECT);
  cert.setIssuer(CA_SUBJECT);
  cert.setExtensions([
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    { name: "subjectKeyIdentifier" },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(pair.keyPem) as forge.pki.rsa.PrivateKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: pair.keyPem };
}

function rsaKeyPair(): { keyPem: string; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { keyPem: privateKey.export({ type: "pkcs1", format: "pem" }) as string, publicPem: publicKey.export({ type: "spki", format: "pem" }) as string };
}

/** A positive serial (the top bit clear), 16 random bytes in hex. */
function serial(): string {
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f;
  return bytes.toString("hex");
}

function loadCa(dir: string): CaFiles | undefined {
  const cert = join(dir, "ca.crt");
  const key = join(dir, "ca.key");
  if (!existsSync(cert) || !existsSync(key)) return undefined;
  return { certPem: readFileSync(cert, "utf8"), keyPem: readFileSync(key, "utf8") };
}

/** Atomic: each file is written beside and renamed, the key first (a certificate without its key is never left). */
function saveCa(dir: string, ca: CaFiles): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const [name, text, mode] of [
    ["ca.key", ca.keyPem, 0o600],
    ["ca.crt", ca.certPem, 0o644],
  ] as const) {
    const tmp = join(dir, `.${name}.${process.pid}`);
    writeFileSync(tmp, text, { mode });
    renameSync(tmp, join(dir, name));
  }
}
