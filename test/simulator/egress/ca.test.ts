import { mkdtempSync, rmSync, statSync } from "node:fs";
import { createServer, connect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { X509Certificate } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { EgressCa } from "../../../simulator/egress/ca.js";

describe("the egress proxy's CA", () => {
  const dir = mkdtempSync(join(tmpdir(), "egress-ca-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is made once and kept in its directory (key 0600), the same on the next run", () => {
    const first = new EgressCa(join(dir, "ca"));
    const again = new EgressCa(join(dir, "ca"));
    expect(again.certPem).toBe(first.certPem);
    expect(statSync(join(dir, "ca", "ca.key")).mode & 0o777).toBe(0o600);
    const cert = new X509Certificate(first.certPem);
    expect(cert.ca).toBe(true);
    expect(new EgressCa(undefined).certPem).not.toBe(first.certPem);
    expect(new EgressCa(undefined).certPem).toBe(new EgressCa(undefined).certPem); // one per process without a directory
  });

  it("signs a certificate per host that a TLS client trusting only the CA accepts, by name and by IP", async () => {
    const ca = new EgressCa(undefined);
    for (const host of ["api.example.test", "127.0.0.1"]) {
      const server = createServer({ SNICallback: (_name, cb) => cb(null, ca.contextFor(host)) }, (s) => s.end("ok"));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      const port = (server.address() as { port: number }).port;
      const text = await new Promise<string>((resolve, reject) => {
        const socket = connect(
          {
            host: "127.0.0.1",
            port,
            servername: host === "127.0.0.1" ? "ip.invalid" : host,
            ca: ca.certPem,
            checkServerIdentity: (_h, cert) => (cert.subjectaltname?.includes(host) ? undefined : new Error(`no SAN for ${host}`)),
          },
          () => {
            let data = "";
            socket.on("data", (d) => (data += d)).on("end", () => resolve(data));
          },
        );
        socket.on("error", reject);
      });
      server.close();
      expect(text).toBe("ok");
    }
  });
});
