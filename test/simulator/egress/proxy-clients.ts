/**
 * Programs the egress suite runs inside sandboxes (written with fs.write): an httpbin-like echo server, and
 * clients that reach a URL over https as the SDK's proxy tests do — through HTTPS_PROXY when it is set (TLS
 * to the proxy for an https:// one, CONNECT host:443, then TLS to the destination), else straight to the URL's
 * host and port (CONNECT_HOST: the address to dial instead of its name). Each prints one JSON line: {status, alpn, echo} (echo: the server's answer).
 */

/** Answers every path with {headers, json, path, method}: json is the parsed request body. */
export const ECHO_SERVER = String.raw`
const http = require("node:http");
http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks).toString();
    let json = null;
    try { json = raw ? JSON.parse(raw) : null; } catch {}
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ headers: req.headers, json, path: req.url, method: req.method }));
  });
}).listen(Number(process.argv[2]));
`;

const TUNNEL = String.raw`
const tls = require("node:tls"), net = require("node:net");
const [method, target, headersJson, body] = process.argv.slice(2);
const t = new URL(target);
const headers = JSON.parse(headersJson || "{}");
const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;
const fail = (what) => (e) => { console.log(what + ": " + (e.message || e)); process.exit(1); };
/** A TLS socket to the destination (alpn given), or the tunnel's own socket (null: the caller's https does TLS), or null straight. */
function open(alpn, done) {
  if (!proxy && !alpn) return done(null);
  if (!proxy) {
    const s = tls.connect({ host: process.env.CONNECT_HOST || t.hostname, port: Number(t.port) || 443, servername: t.hostname, ALPNProtocols: alpn }, () => done(s));
    return s.on("error", fail("DIRECT TLS"));
  }
  const p = new URL(proxy);
  const onProxy = (sock) => {
    let buf = "";
    sock.on("data", function head(chunk) {
      buf += chunk;
      if (!buf.includes("\r\n\r\n")) return;
      sock.removeListener("data", head);
      const code = Number(buf.split(" ")[1]);
      if (code !== 200) { console.log("CONNECT " + code); process.exit(1); }
      if (!alpn) return done(sock);
      const s = tls.connect({ socket: sock, servername: t.hostname, ALPNProtocols: alpn }, () => done(s));
      s.on("error", fail("INNER TLS"));
    });
    sock.write("CONNECT " + t.hostname + ":443 HTTP/1.1\r\nHost: " + t.hostname + ":443\r\n\r\n");
  };
  const port = Number(p.port) || (p.protocol === "https:" ? 443 : 3128);
  const s = p.protocol === "https:" ? tls.connect({ host: p.hostname, port }, () => onProxy(s)) : net.connect({ host: p.hostname, port }, () => onProxy(s));
  s.on("error", fail("PROXY"));
}
setTimeout(() => { console.log("TIMEOUT"); process.exit(1); }, 20000);
`;

/** HTTP/1.1 over the socket (https.request with it). */
export const H1_CLIENT = `${TUNNEL}
const https = require("node:https");
open(null, (socket) => {
  const h = { ...headers, host: t.host };
  if (body) { h["content-type"] = "application/json"; h["content-length"] = Buffer.byteLength(body); }
  const where = socket ? { socket, agent: false } : { host: process.env.CONNECT_HOST || t.hostname, port: Number(t.port) || 443 };
  const req = https.request({ ...where, method, path: t.pathname + t.search, headers: h, servername: t.hostname }, (r) => {
    const alpn = r.socket.alpnProtocol || "http/1.1";
    let d = ""; r.on("data", (c) => (d += c));
    r.on("end", () => { console.log(JSON.stringify({ status: r.statusCode, alpn, echo: JSON.parse(d) })); process.exit(0); });
  });
  req.on("error", fail(socket ? "REQ" : "DIRECT TLS"));
  req.end(body);
});
`;

/** HTTP/2 when the server chose it (ALPN), else it says which protocol it got. */
export const H2_CLIENT = `${TUNNEL}
const http2 = require("node:http2");
open(["h2", "http/1.1"], (socket) => {
  if (socket.alpnProtocol !== "h2") { console.log(JSON.stringify({ status: 0, alpn: socket.alpnProtocol || "(none)", echo: {} })); process.exit(0); }
  const client = http2.connect("https://" + t.host, { createConnection: () => socket });
  client.on("error", fail("H2"));
  const h = { ":method": method, ":path": t.pathname + t.search };
  for (const [k, v] of Object.entries(headers)) h[k.toLowerCase()] = v;
  if (body) { h["content-type"] = "application/json"; h["content-length"] = Buffer.byteLength(body); }
  const req = client.request(h);
  let status = 0, d = "";
  req.on("response", (r) => (status = r[":status"]));
  req.setEncoding("utf8");
  req.on("data", (c) => (d += c));
  req.on("end", () => { console.log(JSON.stringify({ status, alpn: "h2", echo: JSON.parse(d) })); client.close(); process.exit(0); });
  req.on("error", fail("H2 REQ"));
  req.end(body);
});
`;
