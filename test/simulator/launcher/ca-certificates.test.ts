import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { addHostCertificates, hostExtraCertificates, SANDBOX_CA_BUNDLE } from "../../../simulator/launcher/sandbox-setup.js";
import { trackedTempDir } from "../../helpers/temp-dirs.js";

/**
 * A host behind a TLS-inspecting proxy trusts certificates its administrator
 * added; sandboxes over an image get them too, or `npm install` fails with
 * SELF_SIGNED_CERT_IN_CHAIN although the network works.
 */
const PEM = (name: string) => `-----BEGIN CERTIFICATE-----\n${name}\n-----END CERTIFICATE-----`;

describe("the host's added CA certificates in isolated sandboxes", () => {
  it("reads every .crt under the host's directory, nested ones too, and nothing else", () => {
    const dir = trackedTempDir("host-ca-");
    mkdirSync(join(dir, "corp"));
    writeFileSync(join(dir, "proxy.crt"), `${PEM("proxy")}\n`);
    writeFileSync(join(dir, "corp", "root.crt"), PEM("corp"));
    writeFileSync(join(dir, "notes.txt"), "not a certificate");
    const pem = hostExtraCertificates(dir);
    expect(pem).toContain(PEM("proxy"));
    expect(pem).toContain(PEM("corp"));
    expect(pem).not.toContain("not a certificate");
    expect(hostExtraCertificates(join(dir, "missing"))).toBe("");
  });

  it("writes the image's bundle plus the host's into the sandbox's own layer, once, and leaves the image alone", () => {
    const image = trackedTempDir("ca-image-");
    const upper = trackedTempDir("ca-upper-");
    mkdirSync(join(image, "etc/ssl/certs"), { recursive: true });
    writeFileSync(join(image, SANDBOX_CA_BUNDLE), `${PEM("image")}\n`);
    expect(addHostCertificates([image], upper, `${PEM("host")}\n`)).toBe(true);
    expect(readFileSync(join(upper, SANDBOX_CA_BUNDLE), "utf8")).toBe(`${PEM("image")}\n${PEM("host")}\n`);
    expect(readFileSync(join(image, SANDBOX_CA_BUNDLE), "utf8")).toBe(`${PEM("image")}\n`);
    // The sandbox's own bundle (its update-ca-certificates, a restart) is kept.
    writeFileSync(join(upper, SANDBOX_CA_BUNDLE), "own");
    addHostCertificates([image], upper, `${PEM("host")}\n`);
    expect(readFileSync(join(upper, SANDBOX_CA_BUNDLE), "utf8")).toBe("own");
  });

  it("does nothing when the host added none", () => {
    const upper = trackedTempDir("ca-upper-");
    expect(addHostCertificates([trackedTempDir("ca-image-")], upper, "")).toBe(false);
    expect(() => readFileSync(join(upper, SANDBOX_CA_BUNDLE))).toThrow();
  });
});
