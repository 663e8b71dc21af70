// SPEC §4's client ID metadata documents, end to end: a client whose
// client_id is an https URL is described by the document there, fetched
// by the real binary from a real https server on loopback (its own CA,
// given to the server through SSL_CERT_FILE, and --allow-local-network
// for the loopback address): consent names its host as verified, the
// code and tokens work with no registration and no secret, a fresh copy
// is not fetched again, and every document that cannot be used — not
// found, redirected, naming another client_id, too large — is a clear
// error page that redirects nowhere and is not cached as good. Without
// --allow-local-network the SSRF guard refuses it; with --oauth-cimd off
// nothing is fetched or advertised.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer } from "node:https";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, initSession } from "./harness.mjs";
import { Browser, hiddenFields, pkce } from "./oauth-http.mjs";

const EMAIL = "cimd-owner@example.com";
const CALLBACK = "http://127.0.0.1:50123/callback";

let tls; // { dir, ca, key, cert }
let docs; // the https server of client documents
let docsBase;
let srv; // the executor, CIMD on, local network allowed
const fetched = new Map(); // path -> count
const served = new Map(); // path -> (req, res) => void

/** A CA and a leaf for 127.0.0.1 signed by it, made with openssl. */
const makeTls = () => {
  const dir = mkdtempSync(join(tmpdir(), "executor-cimd-tls-"));
  const run = (...args) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  run("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=executor e2e CA",
    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign");
  run("req", ...ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1");
  writeFileSync(join(dir, "leaf.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
  run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "leaf.pem",
    "-days", "2", "-extfile", "leaf.ext");
  return { dir, ca: join(dir, "ca.pem"), key: readFileSync(join(dir, "leaf.key")), cert: readFileSync(join(dir, "leaf.pem")) };
};

const docUrl = (path) => `${docsBase}${path}`;
const documentFor = (path, extra = {}) => ({
  client_id: docUrl(path),
  client_name: "Document client",
  redirect_uris: [CALLBACK],
  grant_types: ["authorization_code", "refresh_token"],
  token_endpoint_auth_method: "private_key_jwt", // ignored: always public
  ...extra,
});
const json = (body, headers = {}) => (req, res) => {
  res.writeHead(200, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
};

before(async () => {
  tls = makeTls();
  docs = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    fetched.set(req.url, (fetched.get(req.url) ?? 0) + 1);
    const handler = served.get(req.url);
    if (handler) return handler(req, res);
    res.writeHead(404).end("not found");
  });
  await new Promise((r) => docs.listen(0, "127.0.0.1", r));
  docsBase = `https://127.0.0.1:${docs.address().port}`;
  srv = await startServer({ args: ["--allow-local-network"], env: { SSL_CERT_FILE: tls.ca } });
});

after(async () => {
  await srv?.cleanup();
  docs?.close();
  if (tls) rmSync(tls.dir, { recursive: true, force: true });
});

const loginLink = (server) =>
  server.cli(["console", "login-link", "--email", EMAIL, "--public-url", server.base, "--data-dir", server.dataDir]).trim();

const authorizeParams = (server, clientId, challenge) => ({
  response_type: "code",
  client_id: clientId,
  redirect_uri: CALLBACK,
  code_challenge: challenge,
  code_challenge_method: "S256",
  state: "st-cimd",
  resource: `${server.base}/mcp`,
});

/** GET /authorize for `path`'s document, unsigned: an error page is answered before sign-in. */
const refusedPage = async (server, path) => {
  const res = await fetch(`${server.base}/authorize?${new URLSearchParams(authorizeParams(server, docUrl(path), pkce().challenge))}`, { redirect: "manual" });
  const text = await res.text();
  assert.equal(res.headers.get("location"), null, "an error page redirects nowhere");
  return { status: res.status, text };
};

test("the metadata advertises client ID metadata documents", async () => {
  const meta = await (await fetch(`${srv.base}/.well-known/oauth-authorization-server`)).json();
  assert.equal(meta.client_id_metadata_document_supported, true);
});

test("a client described by its document signs in with no registration: verified host, code, public token exchange, /mcp", async () => {
  served.set("/client.json", json(documentFor("/client.json"), { "cache-control": "public, max-age=3600" }));
  const clientId = docUrl("/client.json");
  const browser = await new Browser(srv.base).signIn(loginLink(srv));
  const { verifier, challenge } = pkce();
  const page = await browser.go(`/authorize?${new URLSearchParams(authorizeParams(srv, clientId, challenge))}`);
  assert.equal(page.status, 200, page.text);
  assert.match(page.text, /Document client/);
  assert.match(page.text, /described by a document at <b>127\.0\.0\.1<\/b>, verified/);
  assert.doesNotMatch(page.text, /unverified/);
  const answer = await browser.go("/authorize", { method: "POST", form: { ...hiddenFields(page.text), decision: "allow" } });
  assert.equal(answer.status, 303, answer.text);
  const back = new URL(answer.location);
  assert.equal(`${back.origin}${back.pathname}`, CALLBACK);
  assert.equal(back.searchParams.get("iss"), srv.base);
  const res = await fetch(`${srv.base}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: back.searchParams.get("code"),
      redirect_uri: CALLBACK,
      code_verifier: verifier,
      client_id: clientId,
    }),
  });
  const tokens = await res.json();
  assert.equal(res.status, 200, JSON.stringify(tokens));
  assert.ok(tokens.refresh_token);
  const { sessionId } = await initSession(srv, tokens.access_token);
  assert.ok(sessionId, "the access token opens an MCP session");

  // Fresh for an hour: a second authorization reads the saved copy.
  const again = await browser.go(`/authorize?${new URLSearchParams(authorizeParams(srv, clientId, pkce().challenge))}`);
  assert.equal(again.status, 200, again.text);
  assert.equal(fetched.get("/client.json"), 1, "fetched once while fresh");

  // The operator sees it among the clients, by its URL.
  const listed = srv.cli(["oauth", "clients", "list", "--data-dir", srv.dataDir]);
  assert.match(listed, /client\.json/);
});

test("a document that cannot be fetched is a clear error page, and is not cached as good", async () => {
  const path = "/later.json";
  const first = await refusedPage(srv, path);
  assert.equal(first.status, 400);
  assert.match(first.text, /could not be fetched/);
  assert.match(first.text, /HTTP 404/);
  assert.match(first.text, /later\.json/, "the page names the document");
  // Fixed: the next sign-in fetches it anew and goes on to sign-in.
  served.set(path, json(documentFor(path)));
  const res = await fetch(`${srv.base}/authorize?${new URLSearchParams(authorizeParams(srv, docUrl(path), pkce().challenge))}`, { redirect: "manual" });
  assert.equal(res.status, 303, await res.text());
  assert.match(res.headers.get("location"), /\/console\/login\?next=/);
  assert.equal(fetched.get(path), 2);
});

test("a redirected, mismatched or oversized document is refused with its reason", async () => {
  served.set("/moved.json", (req, res) => res.writeHead(302, { location: docUrl("/client.json") }).end());
  const moved = await refusedPage(srv, "/moved.json");
  assert.equal(moved.status, 400);
  assert.match(moved.text, /HTTP 302/, "redirects are not followed");

  served.set("/other.json", json(documentFor("/other.json", { client_id: docUrl("/client.json") })));
  const other = await refusedPage(srv, "/other.json");
  assert.equal(other.status, 400);
  assert.match(other.text, /not valid/);
  assert.match(other.text, /client_id is not the URL/);

  served.set("/big.json", json(documentFor("/big.json", { padding: "x".repeat(70 * 1024) })));
  const big = await refusedPage(srv, "/big.json");
  assert.equal(big.status, 400);
  assert.match(big.text, /larger than 65536 bytes/);

  served.set("/http.json", json(documentFor("/http.json", { redirect_uris: ["http://example.com/cb"] })));
  const plain = await refusedPage(srv, "/http.json");
  assert.equal(plain.status, 400);
  assert.match(plain.text, /not valid/);
});

test("without --allow-local-network the guard refuses a loopback document; with --oauth-cimd off nothing is fetched or advertised", async () => {
  const guarded = await startServer({ env: { SSL_CERT_FILE: tls.ca } });
  const off = await startServer({ args: ["--allow-local-network", "--oauth-cimd", "off"], env: { SSL_CERT_FILE: tls.ca } });
  try {
    const path = "/guarded.json";
    served.set(path, json(documentFor(path)));
    const refused = await refusedPage(guarded, path);
    assert.equal(refused.status, 400);
    assert.match(refused.text, /could not be fetched/);
    assert.match(refused.text, /local/i);
    assert.equal(fetched.get(path) ?? 0, 0, "the guard stopped it before connecting");

    const meta = await (await fetch(`${off.base}/.well-known/oauth-authorization-server`)).json();
    assert.equal(meta.client_id_metadata_document_supported, undefined);
    const unknown = await refusedPage(off, path);
    assert.equal(unknown.status, 400);
    assert.match(unknown.text, /not registered/);
    assert.equal(fetched.get(path) ?? 0, 0, "off: nothing fetched");
  } finally {
    await guarded.cleanup();
    await off.cleanup();
  }
});
