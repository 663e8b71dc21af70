// SPEC §4's built-in authorization server and §14's sign-in, end to end
// against the real binary, with a "browser" that keeps cookies and follows
// nothing by itself (every redirect is looked at): documents, dynamic
// registration, sign-in with a one-time link or a pasted API token, consent,
// codes, tokens at /mcp (and not at /api/v1), refresh rotation with its
// grace, reuse, revocation by the client and by the operator, and the
// client quirks the issue lists, one test each. The official TypeScript
// SDK's whole flow runs with a real browser instead (chromium, browser.mjs):
// sign-in, the consent page and the redirect to the client's listener.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import http from "node:http";
import { startServer, post, rpc, initSession, sleep, connectSdk, openGet, within } from "./harness.mjs";
import { launchBrowser, signIn as signInChromium, approve } from "./browser.mjs";
import { Browser as HttpBrowser, hiddenFields, pkce } from "./oauth-http.mjs";

const EMAIL = "oauth-owner@example.com";
const GRACE_S = 2;
const ACCESS_TTL_S = 3;

let srv;
let apiToken;
const secrets = [];

before(async () => {
  srv = await startServer({
    args: ["--oauth-refresh-grace", String(GRACE_S), "--oauth-access-token-ttl", String(ACCESS_TTL_S), "--oauth-registration-rate", "1000"],
  });
  apiToken = srv.mint(EMAIL);
});

after(async () => {
  await srv?.cleanup();
});

// ------------------------------------------------------------ helpers

/** The cookie-keeping browser of oauth-http.mjs, on this file's server. */
class Browser extends HttpBrowser {
  constructor(origin = srv.base) {
    super(origin);
  }
}

const loginLink = (extra = []) => {
  const link = srv.cli(["console", "login-link", "--email", EMAIL, "--public-url", srv.base, "--data-dir", srv.dataDir, ...extra]).trim();
  secrets.push(new URL(link).searchParams.get("link"));
  return link;
};

/** Signs a browser in with a fresh one-time link. */
const signIn = async (browser) => {
  const page = await browser.go(loginLink());
  assert.equal(page.status, 200, page.text);
  const res = await browser.go("/console/login", { method: "POST", form: hiddenFields(page.text) });
  assert.equal(res.status, 303, res.text);
  assert.ok(browser.cookies.has("executor_session"), "a session cookie is set");
  return browser;
};

const register = async (body) => {
  const res = await fetch(`${srv.base}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json(), headers: res.headers };
};

const token = async (form, headers = {}) => {
  const res = await fetch(`${srv.base}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(form).toString(),
  });
  const json = await res.json();
  for (const k of ["access_token", "refresh_token"]) if (json[k]) secrets.push(json[k]);
  return { status: res.status, json, headers: res.headers };
};

/** Consent through `browser`: the answer's redirect Location, parsed. */
const consent = async (browser, params, decision = "allow") => {
  const page = await browser.go(`/authorize?${new URLSearchParams(params)}`);
  assert.equal(page.status, 200, page.text);
  const res = await browser.go("/authorize", { method: "POST", form: { ...hiddenFields(page.text), decision } });
  assert.equal(res.status, 303, res.text);
  const location = new URL(res.location);
  const code = location.searchParams.get("code");
  if (code) secrets.push(code);
  return location;
};

const REDIRECT = "http://127.0.0.1/callback";

/** A registered public client, signed-in browser, and a grant's tokens. */
const connect = async ({ redirect = REDIRECT, presented = "http://127.0.0.1:49152/callback" } = {}) => {
  const client = (await register({ client_name: "e2e client", redirect_uris: [redirect] })).json;
  const browser = await signIn(new Browser());
  const { verifier, challenge } = pkce();
  const back = await consent(browser, {
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: presented,
    code_challenge: challenge,
    code_challenge_method: "S256",
    state: "st-1",
    scope: "mcp offline_access",
    resource: `${srv.base}/mcp`,
  });
  const code = back.searchParams.get("code");
  const tokens = await token({
    grant_type: "authorization_code",
    code,
    redirect_uri: presented,
    code_verifier: verifier,
    client_id: client.client_id,
  });
  assert.equal(tokens.status, 200, JSON.stringify(tokens.json));
  return { client, browser, code, verifier, presented, tokens: tokens.json };
};

const mcpStatus = async (bearer) => (await post(srv, rpc("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } }), { bearer })).status;

/**
 * `send()`'s answer once a revocation made by another process (the CLI)
 * has reached this server: on SQLite the very next request sees it; on
 * Postgres it arrives with the store's change notice (LISTEN/NOTIFY),
 * milliseconds after the commit, so a request racing the notice is
 * retried for up to a second — and the time it took is asserted.
 */
const afterRevocation = async (send, refused = (res) => res.status === 401) => {
  const started = Date.now();
  let res = await send();
  while (srv.pg && !refused(res) && Date.now() - started < 1000) {
    await sleep(10);
    res = await send();
  }
  return res;
};

// ------------------------------------------------------------ documents

test("the documents name the issuer in the spelling the request used, never with a trailing slash", async () => {
  for (const host of ["127.0.0.1", "localhost"]) {
    const base = `http://${host}:${srv.port}`;
    const prm = await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)).json();
    assert.equal(prm.resource, `${base}/mcp`);
    assert.deepEqual(prm.authorization_servers, [base]);
    assert.deepEqual(prm.scopes_supported, ["mcp", "offline_access"]);
    const res = await fetch(`${base}/.well-known/oauth-authorization-server`);
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    const meta = await res.json();
    assert.equal(meta.issuer, base);
    assert.ok(!meta.issuer.endsWith("/"));
    assert.equal(meta.authorization_endpoint, `${base}/authorize`);
    assert.equal(meta.token_endpoint, `${base}/token`);
    assert.equal(meta.registration_endpoint, `${base}/register`);
    assert.equal(meta.revocation_endpoint, `${base}/revoke`);
    assert.deepEqual(meta.code_challenge_methods_supported, ["S256"]);
    assert.deepEqual(meta.grant_types_supported, ["authorization_code", "refresh_token"]);
    assert.deepEqual(meta.token_endpoint_auth_methods_supported, ["none", "client_secret_post", "client_secret_basic"]);
    assert.equal(meta.authorization_response_iss_parameter_supported, true);
  }
  // An unknown Host never becomes the issuer.
  const evil = await post(srv, rpc("ping"), {});
  assert.equal(evil.status, 401);
  assert.match(evil.headers["www-authenticate"], /scope="mcp"/);
  assert.match(evil.headers["www-authenticate"], /resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp"/);
});

test("CORS preflights of /token, /register and /revoke answer any origin without credentials", async () => {
  for (const path of ["/token", "/register", "/revoke", "/.well-known/oauth-authorization-server"]) {
    const res = await fetch(`${srv.base}${path}`, { method: "OPTIONS", headers: { origin: "https://claude.ai", "access-control-request-method": "POST" } });
    assert.equal(res.status, 204, path);
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    assert.equal(res.headers.get("access-control-allow-credentials"), null);
  }
});

// ------------------------------------------------------------ registration

test("quirk: one registration carries a custom-scheme, an https and a loopback redirect URI", async () => {
  const res = await register({
    client_name: "Cursor-like",
    redirect_uris: ["cursor://anysphere.cursor-retrieval/oauth/callback", "https://app.example.com/cb", "http://localhost/callback"],
  });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  assert.equal(res.json.token_endpoint_auth_method, "none");
  assert.equal(res.json.client_secret, undefined, "a public client gets no secret");
  assert.equal(res.json.redirect_uris.length, 3);
});

test("registration is rate-limited per source address: past it, 429 with Retry-After", async () => {
  const limited = await startServer({ args: ["--oauth-registration-rate", "2"] });
  try {
    const once = () =>
      fetch(`${limited.base}/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ redirect_uris: [REDIRECT] }) });
    assert.equal((await once()).status, 201);
    assert.equal((await once()).status, 201);
    const third = await once();
    assert.equal(third.status, 429);
    assert.ok(third.headers.get("retry-after"));
  } finally {
    await limited.cleanup();
  }
});

test("a dangerous or malformed redirect URI is refused at registration", async () => {
  for (const uri of ["javascript:alert(1)", "http://evil.example/cb", "https://app.example.com/cb#frag", "data:text/html,x"]) {
    const res = await register({ redirect_uris: [uri] });
    assert.equal(res.status, 400, uri);
    assert.equal(res.json.error, "invalid_redirect_uri", uri);
  }
});

// ------------------------------------------------------------ sign-in

test("sign-in: a login link works once; a pasted API token works; OAuth tokens and forged origins do not", async () => {
  const browser = new Browser();
  const link = loginLink();
  const page = await browser.go(link);
  assert.equal(page.headers.get("x-frame-options"), "DENY");
  assert.match(page.headers.get("content-security-policy"), /frame-ancestors 'none'/);
  const fields = hiddenFields(page.text);
  // From another origin: refused (login CSRF), and the link is not used up.
  const forged = await browser.go("/console/login", { method: "POST", form: fields, origin: "https://evil.example" });
  assert.equal(forged.status, 403);
  const ok = await browser.go("/console/login", { method: "POST", form: fields });
  assert.equal(ok.status, 303);
  const cookie = ok.headers.get("set-cookie");
  assert.match(cookie, /HttpOnly/);
  assert.match(cookie, /SameSite=Lax/);
  assert.doesNotMatch(cookie, /Secure/, "http public URL: no Secure flag");
  const again = await new Browser().go("/console/login", { method: "POST", form: fields });
  assert.equal(again.status, 401, "a link is single use");

  const pasted = new Browser();
  const res = await pasted.go("/console/login", { method: "POST", form: { token: apiToken } });
  assert.equal(res.status, 303);
  assert.ok(pasted.cookies.has("executor_session"));
  const bad = await new Browser().go("/console/login", { method: "POST", form: { token: "exk_nope_nope" } });
  assert.equal(bad.status, 401);

  // Sign-out needs the page's CSRF token.
  const home = await pasted.go("/console/login");
  const csrf = hiddenFields(home.text).csrf;
  assert.ok(csrf);
  assert.equal((await pasted.go("/console/logout", { method: "POST", form: { csrf: "wrong" } })).status, 403);
  assert.equal((await pasted.go("/console/logout", { method: "POST", form: { csrf } })).status, 303);
  assert.ok(!pasted.cookies.has("executor_session"));
});

test("revoking the API token a browser signed in with signs that browser out", async () => {
  const own = srv.mint(EMAIL);
  const browser = new Browser();
  await browser.go("/console/login", { method: "POST", form: { token: own } });
  assert.match((await browser.go("/console/login")).text, /Signed in|signed in/);
  srv.revoke(own);
  const after = await browser.go("/console/login");
  assert.match(after.text, /API token/, "the sign-in form again");
  assert.doesNotMatch(after.text, /Sign out/);
});

// ------------------------------------------------------------ the code flow

test("authorization code flow: consent, code, tokens; the access token works at /mcp only", async () => {
  const { tokens } = await connect();
  assert.equal(tokens.token_type, "Bearer");
  assert.equal(tokens.expires_in, ACCESS_TTL_S);
  assert.ok(tokens.refresh_token.startsWith("exr_"));
  assert.equal(tokens.scope, "mcp offline_access");
  const { client } = await connectSdk(srv, tokens.access_token);
  const listed = await client.listTools();
  assert.ok(listed.tools.some((t) => t.name === "execute"));
  const ran = await client.callTool({ name: "execute", arguments: { code: "return 6 * 7;" } });
  assert.match(JSON.stringify(ran), /42/);
  await client.close();
  // The management API refuses it.
  const api = await fetch(`${srv.base}/api/v1/me`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
  assert.equal(api.status, 401);
  assert.equal((await api.json()).code, "invalid_token");
  // And an API token keeps working beside OAuth.
  assert.equal((await fetch(`${srv.base}/api/v1/me`, { headers: { authorization: `Bearer ${apiToken}` } })).status, 200);
});

test("every redirect back carries iss and state; Deny is access_denied", async () => {
  const client = (await register({ redirect_uris: [REDIRECT] })).json;
  const browser = await signIn(new Browser());
  const { challenge } = pkce();
  const back = await consent(
    browser,
    { response_type: "code", client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256", state: "s&t=1" },
    "deny",
  );
  assert.equal(back.searchParams.get("error"), "access_denied");
  assert.equal(back.searchParams.get("state"), "s&t=1");
  assert.equal(back.searchParams.get("iss"), srv.base);
});

test("not signed in: /authorize sends the browser to sign in and back", async () => {
  const client = (await register({ redirect_uris: [REDIRECT] })).json;
  const { challenge } = pkce();
  const params = { response_type: "code", client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256" };
  const browser = new Browser();
  const res = await browser.go(`/authorize?${new URLSearchParams(params)}`);
  assert.equal(res.status, 303);
  const to = new URL(res.location, srv.base);
  assert.equal(to.pathname, "/console/login");
  const next = to.searchParams.get("next");
  assert.ok(next.startsWith("/authorize?"));
  // Signing in with a token on that page returns to the request.
  const signedIn = await browser.go("/console/login", { method: "POST", form: { token: apiToken, next } });
  assert.equal(signedIn.location, next);
  assert.equal((await browser.go(next)).status, 200);
});

test("an unknown client or an unregistered redirect URI gets an error page, never a redirect", async () => {
  const browser = await signIn(new Browser());
  const client = (await register({ redirect_uris: [REDIRECT] })).json;
  const { challenge } = pkce();
  const base = { response_type: "code", code_challenge: challenge, code_challenge_method: "S256", state: "x" };
  for (const params of [
    { ...base, client_id: "cl_unknown", redirect_uri: REDIRECT },
    { ...base, client_id: client.client_id, redirect_uri: "https://evil.example/cb" },
    { ...base, client_id: client.client_id, redirect_uri: "http://127.0.0.1:5555/other" },
  ]) {
    const res = await browser.go(`/authorize?${new URLSearchParams(params)}`);
    assert.equal(res.status, 400, JSON.stringify(params));
    assert.equal(res.location, null);
    assert.match(res.headers.get("content-type"), /text\/html/);
  }
});

test("before sign-in, a bad request is never redirected to the client: the browser signs in first", async () => {
  const client = (await register({ redirect_uris: ["https://evil.example/"] })).json;
  const res = await new Browser().go(`/authorize?${new URLSearchParams({ response_type: "token", client_id: client.client_id, redirect_uri: "https://evil.example/" })}`);
  assert.equal(res.status, 303);
  assert.equal(new URL(res.location, srv.base).pathname, "/console/login");
});

test("PKCE: plain or missing is invalid_request at the client's redirect URI", async () => {
  const browser = await signIn(new Browser());
  const client = (await register({ redirect_uris: [REDIRECT] })).json;
  for (const extra of [{ code_challenge: "a".repeat(43), code_challenge_method: "plain" }, {}]) {
    const res = await browser.go(`/authorize?${new URLSearchParams({ response_type: "code", client_id: client.client_id, redirect_uri: REDIRECT, ...extra })}`);
    assert.equal(res.status, 303);
    const back = new URL(res.location);
    assert.equal(back.searchParams.get("error"), "invalid_request");
    assert.equal(back.searchParams.get("iss"), srv.base);
  }
});

test("quirk: a loopback redirect registered without a port is used with one; localhost and 127.0.0.1 are told apart", async () => {
  const { tokens } = await connect({ redirect: "http://localhost/cb", presented: "http://localhost:61234/cb" });
  assert.ok(tokens.access_token);
  const client = (await register({ redirect_uris: ["http://localhost/cb"] })).json;
  const browser = await signIn(new Browser());
  const { challenge } = pkce();
  const res = await browser.go(
    `/authorize?${new URLSearchParams({ response_type: "code", client_id: client.client_id, redirect_uri: "http://127.0.0.1:61234/cb", code_challenge: challenge, code_challenge_method: "S256" })}`,
  );
  assert.equal(res.status, 400, "127.0.0.1 is not the localhost registered");
});

test("quirk: a resource with a trailing slash or an upper-case host is this server; another host is invalid_target", async () => {
  const browser = await signIn(new Browser());
  const client = (await register({ redirect_uris: [REDIRECT] })).json;
  const ask = async (resource) => {
    const { challenge } = pkce();
    const page = await browser.go(
      `/authorize?${new URLSearchParams({ response_type: "code", client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256", resource })}`,
    );
    return page;
  };
  assert.equal((await ask(`${srv.base}/mcp/`)).status, 200);
  assert.equal((await ask(`http://LOCALHOST:${srv.port}/mcp`)).status, 200);
  const other = await ask(`http://other.example:${srv.port}/mcp`);
  assert.equal(other.status, 303);
  assert.equal(new URL(other.location).searchParams.get("error"), "invalid_target");
});

test("the consent POST is refused without its CSRF token or from another origin", async () => {
  const browser = await signIn(new Browser());
  const client = (await register({ redirect_uris: [REDIRECT] })).json;
  const { challenge } = pkce();
  const page = await browser.go(
    `/authorize?${new URLSearchParams({ response_type: "code", client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256" })}`,
  );
  assert.equal(page.headers.get("x-frame-options"), "DENY");
  assert.match(page.text, /unverified/);
  assert.match(page.text, /this machine/, "a loopback redirect is flagged");
  const fields = hiddenFields(page.text);
  const { csrf, ...withoutCsrf } = fields;
  assert.ok(csrf);
  const noToken = await browser.go("/authorize", { method: "POST", form: { ...withoutCsrf, decision: "allow" } });
  assert.equal(noToken.status, 403);
  assert.equal(noToken.location, null);
  const forged = await browser.go("/authorize", { method: "POST", form: { ...fields, decision: "allow" }, origin: "https://evil.example" });
  assert.equal(forged.status, 403);
  assert.equal(forged.location, null);
});

// ------------------------------------------------------------ codes and tokens

test("a code is single use: its second use is invalid_grant and revokes what the first issued", async () => {
  const { client, code, verifier, presented, tokens } = await connect();
  assert.equal(await mcpStatus(tokens.access_token), 200);
  const again = await token({ grant_type: "authorization_code", code, redirect_uri: presented, code_verifier: verifier, client_id: client.client_id });
  assert.equal(again.status, 400);
  assert.equal(again.json.error, "invalid_grant");
  assert.equal(again.headers.get("cache-control"), "no-store");
  assert.equal(await mcpStatus(tokens.access_token), 401);
  const refreshed = await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
  assert.equal(refreshed.json.error, "invalid_grant");
});

test("a code bound to another verifier or client is invalid_grant; a wrong resource is invalid_target", async () => {
  const client = (await register({ redirect_uris: [REDIRECT] })).json;
  const browser = await signIn(new Browser());
  const { challenge } = pkce();
  const back = await consent(browser, { response_type: "code", client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256" });
  const code = back.searchParams.get("code");
  const wrongResource = await token({ grant_type: "authorization_code", code, code_verifier: pkce().verifier, client_id: client.client_id, resource: "https://other.example/mcp" });
  assert.equal(wrongResource.json.error, "invalid_target");
  const wrongVerifier = await token({ grant_type: "authorization_code", code, code_verifier: pkce().verifier, client_id: client.client_id });
  assert.equal(wrongVerifier.json.error, "invalid_grant");
});

test("quirk: two concurrent refreshes with one refresh token both succeed; a reuse after the grace revokes the grant", async () => {
  const { client, tokens } = await connect();
  const refresh = () => token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
  const [a, b] = await Promise.all([refresh(), refresh()]);
  assert.equal(a.status, 200, JSON.stringify(a.json));
  assert.equal(b.status, 200, JSON.stringify(b.json));
  assert.notEqual(a.json.refresh_token, tokens.refresh_token, "rotated");
  assert.equal(await mcpStatus(a.json.access_token), 200);
  assert.equal(await mcpStatus(b.json.access_token), 200);
  await sleep(GRACE_S * 1000 + 500);
  const late = await refresh();
  assert.equal(late.status, 400);
  assert.equal(late.json.error, "invalid_grant");
  for (const t of [tokens.access_token, a.json.access_token, b.json.access_token]) assert.equal(await mcpStatus(t), 401);
  const newer = await token({ grant_type: "refresh_token", refresh_token: a.json.refresh_token, client_id: client.client_id });
  assert.equal(newer.json.error, "invalid_grant", "the whole grant is revoked");
});

test("an expired access token is refused at /mcp and a refresh brings access back", async () => {
  const { client, tokens } = await connect();
  await sleep(ACCESS_TTL_S * 1000 + 300);
  assert.equal(await mcpStatus(tokens.access_token), 401);
  const refreshed = await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
  assert.equal(refreshed.status, 200);
  assert.equal(await mcpStatus(refreshed.json.access_token), 200);
});

test("quirk: a deleted client gets invalid_client (401), so that it registers again", async () => {
  const { client, tokens } = await connect();
  srv.cli(["oauth", "clients", "delete", client.client_id, "--data-dir", srv.dataDir]);
  const res = await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
  assert.equal(res.status, 401);
  assert.equal(res.json.error, "invalid_client");
  assert.equal(await mcpStatus(tokens.access_token), 401, "its grants are revoked");
});

test("a confidential client must present its secret, by Basic or in the body", async () => {
  const reg = await register({ redirect_uris: [REDIRECT], token_endpoint_auth_method: "client_secret_basic" });
  assert.equal(reg.status, 201);
  assert.ok(reg.json.client_secret);
  const browser = await signIn(new Browser());
  const { verifier, challenge } = pkce();
  const back = await consent(browser, { response_type: "code", client_id: reg.json.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256" });
  const form = { grant_type: "authorization_code", code: back.searchParams.get("code"), code_verifier: verifier };
  const basic = (secret) => ({ authorization: `Basic ${Buffer.from(`${reg.json.client_id}:${secret}`).toString("base64")}` });
  const wrong = await token(form, basic("wrong"));
  assert.equal(wrong.status, 401);
  assert.equal(wrong.json.error, "invalid_client");
  assert.match(wrong.headers.get("www-authenticate"), /Basic/);
  // The code was not spent by a client that failed to authenticate.
  const ok = await token(form, basic(reg.json.client_secret));
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
});

test("RFC 7009: the client revokes its refresh token and the whole grant stops", async () => {
  const { client, tokens } = await connect();
  const res = await fetch(`${srv.base}/revoke`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token: tokens.refresh_token, client_id: client.client_id }).toString(),
  });
  assert.equal(res.status, 200);
  assert.equal(await mcpStatus(tokens.access_token), 401);
  // Unknown tokens are 200 too, and change nothing.
  const unknown = await fetch(`${srv.base}/revoke`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token: "exr_unknown", client_id: client.client_id }).toString(),
  });
  assert.equal(unknown.status, 200);
});

test("the operator revokes a grant from the CLI: its tokens stop at once (Postgres: with the change notice), also on a live session", async () => {
  const { tokens } = await connect();
  const session = await initSession(srv, tokens.access_token);
  const listed = srv.cli(["oauth", "grants", "list", "--email", EMAIL, "--data-dir", srv.dataDir]);
  const grantId = listed.split("\n").find((l) => l.includes("active"))?.split("\t")[0];
  assert.ok(grantId?.startsWith("gr_"), listed);
  srv.cli(["oauth", "grants", "revoke", grantId, "--data-dir", srv.dataDir]);
  const res = await afterRevocation(() =>
    post(srv, rpc("tools/list"), { bearer: tokens.access_token, sessionId: session.sessionId, protocolVersion: session.protocolVersion }),
  );
  assert.equal(res.status, 401);
  assert.match(res.headers["www-authenticate"], /invalid_token/);
});

test("revoking a grant closes the GET stream its access token opened within 5 s", async () => {
  const { tokens, client } = await connect();
  const { sessionId, protocolVersion } = await initSession(srv, tokens.access_token, "2025-11-25");
  const get = await openGet(srv, { bearer: tokens.access_token, sessionId, protocolVersion });
  assert.equal(get.status, 200);
  const grants = await (await fetch(`${srv.base}/api/v1/oauth/grants`, { headers: { authorization: `Bearer ${apiToken}` } })).json();
  const grant = grants.items.find((g) => g.clientId === client.client_id);
  const t0 = Date.now();
  srv.cli(["oauth", "grants", "revoke", grant.id, "--data-dir", srv.dataDir]);
  await get.waitFor(() => get.ended, 6000).catch(() => {});
  assert.ok(get.ended, "the stream is closed");
  assert.ok(Date.now() - t0 <= 5000, `closed after ${Date.now() - t0} ms`);
  assert.equal(await mcpStatus(tokens.access_token), 401);
});

test("pre-registered clients: added from the CLI with a secret shown once", async () => {
  const out = srv.cli(["oauth", "clients", "add", "--name", "Pre", "--redirect-uri", "https://pre.example.com/cb", "--secret", "--data-dir", srv.dataDir]);
  const id = out.match(/client_id\t(\S+)/)[1];
  const secret = out.match(/client_secret\t(\S+)/)[1];
  secrets.push(secret);
  const listed = srv.cli(["oauth", "clients", "list", "--data-dir", srv.dataDir]);
  assert.ok(listed.includes(id));
  assert.ok(listed.includes("preregistered"));
  assert.ok(!listed.includes(secret));
});

const api = (path, { bearer = apiToken, method = "GET", body, headers = {} } = {}) =>
  fetch(`${srv.base}/api/v1${path}`, {
    method,
    headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...(body ? { "content-type": "application/json" } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });

test("the management API lists and revokes the org's grants; another org sees none of them", async () => {
  const { tokens, client } = await connect();
  const listed = await (await api("/oauth/grants")).json();
  const grant = listed.items.find((g) => g.clientId === client.client_id && g.state === "active");
  assert.ok(grant, JSON.stringify(listed));
  assert.equal(grant.clientName, "e2e client");
  assert.equal(grant.redirectHost, "127.0.0.1");
  // The secret is all after the id (it may contain "_" itself).
  assert.ok(!JSON.stringify(listed).includes(tokens.access_token.split("_").slice(2).join("_")));
  const clients = await (await api("/oauth/clients")).json();
  assert.ok(clients.items.some((c) => c.id === client.client_id));
  // Another org: 404 for the grant, and the client is not among its own.
  const stranger = srv.mint("stranger@example.com");
  assert.equal((await api(`/oauth/grants/${grant.id}/revoke`, { bearer: stranger, method: "POST" })).status, 404);
  assert.equal((await api(`/oauth/clients/${client.client_id}`, { bearer: stranger })).status, 404);
  assert.equal(await mcpStatus(tokens.access_token), 200);
  const revoked = await api(`/oauth/grants/${grant.id}/revoke`, { method: "POST" });
  assert.equal(revoked.status, 204);
  assert.equal(await mcpStatus(tokens.access_token), 401);
  const after = await (await api("/oauth/grants")).json();
  assert.equal(after.items.find((g) => g.id === grant.id).state, "revoked");
});

test("the management API pre-registers a client (secret once) and removes a client from the org", async () => {
  const made = await api("/oauth/clients", { method: "POST", body: { name: "From the API", redirectUris: ["https://api-made.example.com/cb"], secret: true } });
  assert.equal(made.status, 201);
  const body = await made.json();
  secrets.push(body.clientSecret);
  assert.ok(body.clientSecret.startsWith("exs_"));
  assert.equal(made.headers.get("location"), `/api/v1/oauth/clients/${body.client.id}`);
  const got = await (await api(`/oauth/clients/${body.client.id}`)).json();
  assert.equal(got.clientSecret, undefined);
  assert.equal(got.origin, "preregistered");
  const bad = await api("/oauth/clients", { method: "POST", body: { name: "x", redirectUris: ["javascript:alert(1)"] } });
  assert.equal(bad.status, 422);
  const { tokens, client } = await connect();
  assert.equal((await api(`/oauth/clients/${client.client_id}`, { method: "DELETE" })).status, 204);
  assert.equal(await mcpStatus(tokens.access_token), 401, "the org's grants of it are revoked");
});

test("a signed-in browser calls the management API with its cookie, and unsafe methods need its CSRF token", async () => {
  const browser = await signIn(new Browser());
  const cookie = [...browser.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  const me = await api("/me", { bearer: null, headers: { cookie } });
  assert.equal(me.status, 200);
  const without = await api("/tokens", { bearer: null, method: "POST", body: {}, headers: { cookie, origin: srv.base } });
  assert.equal(without.status, 403);
  const csrf = hiddenFields((await browser.go("/console/login")).text).csrf;
  const elsewhere = await api("/tokens", { bearer: null, method: "POST", body: {}, headers: { cookie, "x-csrf-token": csrf, origin: "https://evil.example" } });
  assert.equal(elsewhere.status, 403, "the CSRF token from another origin is refused");
  const withToken = await api("/tokens", { bearer: null, method: "POST", body: {}, headers: { cookie, "x-csrf-token": csrf, origin: srv.base } });
  assert.equal(withToken.status, 201);
  secrets.push((await withToken.json()).token);
});

/**
 * A native client's loopback listener for the authorization response (RFC
 * 8252 §7.3), as the SDK's users run one: it keeps the URL of every
 * request to /callback and answers the browser with a page.
 */
const callbackListener = async () => {
  const received = [];
  let arrived;
  const first = new Promise((r) => (arrived = r));
  const server = http.createServer((req, res) => {
    const url = `http://127.0.0.1:${server.address().port}${req.url}`;
    if (new URL(url).pathname === "/callback") {
      received.push(url);
      arrived(url);
    }
    res.writeHead(200, { "content-type": "text/plain" }).end("Signed in; you can close this tab.");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    redirectUrl: `http://127.0.0.1:${server.address().port}/callback`,
    received,
    first,
    close: () => new Promise((r) => server.close(r)),
  };
};

/**
 * The official SDK's OAuth client provider, kept in memory. Its browser
 * step is a person's: chromium (signed in beforehand) opens the URL, the
 * consent page is read and allowed, and the code arrives at the listener.
 */
class MemoryProvider {
  constructor(page, listener) {
    this.page = page;
    this.listener = listener;
    this.saved = {};
    this.redirects = [];
  }
  get redirectUrl() {
    return this.listener.redirectUrl;
  }
  get clientMetadata() {
    return { client_name: "SDK e2e", redirect_uris: [this.redirectUrl], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  state() {
    return "sdk-state-1";
  }
  clientInformation() {
    return this.saved.client;
  }
  saveClientInformation(info) {
    this.saved.client = info;
  }
  tokens() {
    return this.saved.tokens;
  }
  saveTokens(tokens) {
    this.saved.tokens = tokens;
    secrets.push(tokens.access_token, tokens.refresh_token);
  }
  async redirectToAuthorization(url) {
    this.redirects.push(url);
    const back = await approve(this.page, url.toString(), { clientName: "SDK e2e", redirectHost: "127.0.0.1" });
    assert.equal(back.status, 200, "the client's listener answered the browser");
    const received = await within(this.listener.first, 5000, "the listener received no callback");
    assert.equal(received, back.url, "the listener got what the browser was sent to");
    const params = new URL(received).searchParams;
    assert.equal(params.get("state"), "sdk-state-1");
    assert.equal(params.get("iss"), srv.base);
    assert.equal(params.get("error"), null);
    this.code = params.get("code");
    assert.ok(this.code, received);
    secrets.push(this.code);
  }
  saveCodeVerifier(v) {
    this.saved.verifier = v;
  }
  codeVerifier() {
    return this.saved.verifier;
  }
}

const sdkConnect = async (provider) => {
  const make = () => new StreamableHTTPClientTransport(new URL(srv.mcpUrl), { authProvider: provider });
  const client = new Client({ name: "sdk-oauth-e2e", version: "0.0.1" }, { capabilities: {} });
  let transport = make();
  try {
    await client.connect(transport);
    return { client, transport };
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  await transport.finishAuth(provider.code);
  transport = make();
  await client.connect(transport);
  return { client, transport };
};

test("the official TypeScript SDK client with chromium: registers, authorizes, lists tools, runs execute, refreshes, and loses access on revoke", async () => {
  const listener = await callbackListener();
  const chromium = await launchBrowser();
  try {
    await signInChromium(chromium.page, loginLink());
    const provider = new MemoryProvider(chromium.page, listener);
    const { client } = await sdkConnect(provider);
    assert.equal(provider.redirects.length, 1, "one browser step");
    assert.equal(listener.received.length, 1, "one callback");
    const auth = provider.redirects[0];
    assert.equal(auth.searchParams.get("code_challenge_method"), "S256");
    assert.equal(auth.searchParams.get("resource"), `${srv.base}/mcp`);
    assert.equal(auth.searchParams.get("redirect_uri"), listener.redirectUrl);
    assert.ok(provider.saved.client.client_id.startsWith("cl_"), "registered dynamically");
    assert.ok((await client.listTools()).tools.some((t) => t.name === "execute"));
    const ran = await client.callTool({ name: "execute", arguments: { code: "return 'sdk-' + (20 + 22);" } });
    assert.match(JSON.stringify(ran), /sdk-42/);
    // Past the access token's life, the SDK refreshes on its 401 and goes on.
    const first = provider.saved.tokens.access_token;
    await sleep(ACCESS_TTL_S * 1000 + 300);
    const again = await client.callTool({ name: "execute", arguments: { code: "return 7;" } });
    assert.match(JSON.stringify(again), /7/);
    assert.notEqual(provider.saved.tokens.access_token, first, "refreshed");
    assert.equal(provider.redirects.length, 1, "no second browser step");
    await client.close();
    // Revoked from the CLI: access stops at once, and the refresh token
    // is dead too (the access token alone could also have just expired).
    const listed = srv.cli(["oauth", "grants", "list", "--email", EMAIL, "--data-dir", srv.dataDir]);
    const grantId = listed.split("\n").find((l) => l.includes("SDK e2e") && l.includes("active"))?.split("\t")[0];
    assert.ok(grantId, listed);
    const { access_token, refresh_token } = provider.saved.tokens;
    assert.equal(await mcpStatus(access_token), 200, "working before the revoke");
    srv.cli(["oauth", "grants", "revoke", grantId, "--data-dir", srv.dataDir]);
    assert.equal(await afterRevocation(() => mcpStatus(access_token), (status) => status === 401), 401);
    const refreshed = await token({ grant_type: "refresh_token", refresh_token, client_id: provider.saved.client.client_id });
    assert.equal(refreshed.json.error, "invalid_grant", JSON.stringify(refreshed.json));
  } finally {
    await chromium.close();
    await listener.close();
  }
});

test("codes, tokens, client secrets and login links never appear in the server log or the store", async () => {
  assert.ok(secrets.length > 10, "the tests above handed out secrets");
  const dump = srv.storeDump();
  for (const s of secrets) {
    assert.ok(!srv.log.includes(s), "a secret is in the server log");
    assert.ok(!dump.includes(s), "a secret is stored in clear");
  }
});
