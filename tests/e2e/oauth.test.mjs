// SPEC §9 OAuth connections end to end, against a real authorization server
// (oidc-provider, fixtures/oauth-as.mjs) protecting an MCP server, an
// OpenAPI-described API and a GraphQL endpoint: `add`
// stores it as needing a login; `executor connections login` completes
// through the running server's /oauth/callback (the "browser" is curl with a
// cookie jar, following redirects); calls carry the token; an expired token
// is refreshed once for concurrent calls; a rotated refresh token survives a
// restart; a revoked grant answers oauth_reauth_required; and no token or
// secret shows up in anything the agent, the operator or the disk sees.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, connectSdk, freePort, sleep, waitUntil, BIN } from "./harness.mjs";

const FIXTURE = fileURLToPath(new URL("./fixtures/oauth-as.mjs", import.meta.url));
const ORG = "oauth";

let srv;
let as;
let client;
const outputs = [];
const jar = mkdtempSync(join(tmpdir(), "executor-oauth-jar-"));

const startAs = async () => {
  const port = await freePort();
  const child = spawn(process.execPath, [FIXTURE, String(port)], { stdio: ["ignore", "pipe", "pipe"] });
  const s = { child, port, out: "", origin: `http://127.0.0.1:${port}` };
  child.stdout.on("data", (d) => (s.out += d));
  child.stderr.on("data", (d) => (s.out += d));
  await waitUntil("the authorization server", () => s.out.includes(`listening ${port}`), { ms: 15_000 });
  s.get = async (path) => (await fetch(`${s.origin}${path}`)).json();
  return s;
};

/** The CLI, asynchronously (the server under test answers its callback). */
const cliRaw = (...args) =>
  new Promise((resolve, reject) =>
    execFile(BIN, [...args, "--data-dir", srv.dataDir], { timeout: 60_000, env: srv.env }, (error, stdout, stderr) => {
      outputs.push(stdout, stderr);
      error ? reject(new Error(`${args.join(" ")}: ${stderr}`)) : resolve(stdout);
    }),
  );
const cli = (...args) => cliRaw(...args, "--org", ORG);

/** `connections login`, with a browser that follows the URL it prints. */
const login = async (namespace = "secure") => {
  const child = spawn(
    BIN,
    ["connections", "login", namespace, "--allow-local-network", "--no-browser", "--listen", `127.0.0.1:${srv.port}`, "--timeout", "30", "--org", ORG, "--data-dir", srv.dataDir],
    { stdio: ["ignore", "pipe", "pipe"], env: srv.env },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  await waitUntil("the authorization URL", () => /^https?:\/\//m.test(stdout) || child.exitCode !== null, { ms: 20_000 });
  const url = stdout.split("\n").find((l) => /^https?:\/\//.test(l));
  assert.ok(url, `login printed no URL: ${stderr}`);
  await new Promise((resolve, reject) =>
    execFile("curl", ["-sS", "-L", "--max-redirs", "10", "-c", join(jar, "cookies"), "-b", join(jar, "cookies"), "-o", "/dev/null", url], (e) =>
      e ? reject(e) : resolve(),
    ),
  );
  const code = await exited;
  outputs.push(stdout, stderr);
  assert.equal(code, 0, `login failed: ${stderr}`);
  return stdout;
};

const call = async (code) => {
  const res = await client.callTool({ name: "execute", arguments: { code } });
  outputs.push(JSON.stringify(res));
  return res.structuredContent;
};

before(async () => {
  as = await startAs();
  srv = await startServer({ args: ["--allow-local-network"] });
  ({ client } = await connectSdk(srv, srv.mint("ops@example.com", ORG)));
  const added = await cli("integrations", "add", "mcp", "--url", `${as.origin}/mcp`, "--namespace", "secure", "--allow-local-network");
  assert.match(added, /needs an OAuth login|asks for an OAuth login/);
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
  as?.child.kill("SIGKILL");
  rmSync(jar, { recursive: true, force: true });
});

test("an MCP server that asks for a login is stored as needing one, and calls say which command to run", async () => {
  const listed = await cli("integrations", "list");
  assert.match(listed, /secure.*needs login/);
  const out = await call("return await tools.executor.integrations.list({})");
  assert.ok(JSON.stringify(out).includes("secure"));
});

test("a login through the running server's callback makes the tools callable", async () => {
  await fetch(`${as.origin}/_test/ttl?s=3`);
  const printed = await login();
  assert.match(printed, /^secure\toauth\tready\tscopes=mcp:tools/m);
  const stats = await as.get("/_test/stats");
  assert.equal(stats.registrations, 1, "one dynamic registration");
  assert.equal(stats.grants.authorization_code, 1);
  const out = await call("return await tools.secure.whoami({})");
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.equal(out.result.data.structuredContent.account, "alice");
  const listed = await cli("connections", "list");
  assert.match(listed, /^secure\toauth\tready\tscopes=mcp:tools/m);
});

test("an expired token is refreshed once for twenty concurrent calls", async () => {
  await sleep(3500);
  const before = (await as.get("/_test/stats")).grants.refresh_token;
  const out = await call(
    "const all = await Promise.all(Array.from({length: 20}, () => tools.secure.whoami({}))); return all.map((r) => r.ok);",
  );
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.deepEqual(out.result, Array(20).fill(true));
  const after = (await as.get("/_test/stats")).grants.refresh_token;
  assert.equal(after - before, 1, "one refresh for all");
});

test("the rotated refresh token survives a restart of the server", async () => {
  await client.close();
  await srv.stop();
  await srv.restart();
  ({ client } = await connectSdk(srv, srv.mint("ops@example.com", ORG)));
  await sleep(3500);
  const out = await call("return (await tools.secure.whoami({})).ok");
  // oidc-provider revokes the grant when a spent refresh token is used:
  // this passes only with the rotated one saved.
  assert.equal(out.result, true, JSON.stringify(out));
});

test("a refresh by a CLI process racing the server's never loses the grant", async () => {
  for (let round = 0; round < 3; round++) {
    await sleep(3500);
    const before = (await as.get("/_test/stats")).grants.refresh_token;
    const [fromCli, fromServer] = await Promise.all([
      cli("call", "secure.whoami", "{}", "--allow-local-network", "--email", "ops@example.com"),
      call("return (await Promise.all(Array.from({length: 10}, () => tools.secure.whoami({})))).map((r) => r.ok)"),
    ]);
    assert.match(fromCli, /alice/);
    assert.deepEqual(fromServer.result, Array(10).fill(true), JSON.stringify(fromServer));
    const after = (await as.get("/_test/stats")).grants.refresh_token;
    assert.equal(after - before, 1, `round ${round}: one refresh between the two processes`);
  }
});

test("an authorization server that forgot our client leads to a new registration at the next login", async () => {
  const registered = (await as.get("/_test/stats")).registrations;
  await fetch(`${as.origin}/_test/forget-clients`);
  await sleep(3500);
  const out = await call("const r = await tools.secure.whoami({}); return r.ok ? 'ok' : r.error;");
  assert.equal(out.result.code, "oauth_reauth_required", JSON.stringify(out));
  assert.match(out.result.message, /invalid_client/);
  await login();
  assert.equal((await as.get("/_test/stats")).registrations, registered + 1);
  const again = await call("return (await tools.secure.whoami({})).ok");
  assert.equal(again.result, true, JSON.stringify(again));
});

test("a revoked grant answers oauth_reauth_required naming the login command, and a new login mends it", async () => {
  await fetch(`${as.origin}/_test/revoke`);
  await sleep(3500);
  const out = await call("const r = await tools.secure.whoami({}); return r.ok ? 'ok' : r.error;");
  assert.equal(out.result.code, "oauth_reauth_required", JSON.stringify(out));
  assert.match(out.result.message, /executor connections login secure/);
  await fetch(`${as.origin}/_test/ttl?s=3600`);
  await login();
  const again = await call("return (await tools.secure.whoami({})).ok");
  assert.equal(again.result, true, JSON.stringify(again));
});

test("an OpenAPI oauth2 scheme: login, a call, refresh, a restart, a revoked grant; one program uses the API and the MCP server", async () => {
  await cli("integrations", "add", "openapi", "--spec", `${as.origin}/openapi.json`, "--namespace", "api", "--allow-local-network");
  await fetch(`${as.origin}/_test/ttl?s=3`);
  const before = await call("const r = await tools.api.me.getMe({}); return r.ok ? 'ok' : r.error;");
  assert.equal(before.result.code, "connection_missing", JSON.stringify(before));
  assert.match(before.result.message, /executor connections login api/);
  const printed = await login("api");
  assert.match(printed, /^api\toauth\tready\tscopes=api:read/m);
  const out = await call(
    "const [me, mcp] = await Promise.all([tools.api.me.getMe({}), tools.secure.whoami({})]); return { api: me.data.account, mcp: mcp.data.structuredContent.account };",
  );
  assert.deepEqual(out.result, { api: "alice", mcp: "alice" }, JSON.stringify(out));
  const getMe = "const r = await tools.api.me.getMe({}); return r.ok ? r.data.account : r.error;";
  // Expiry and refresh.
  await sleep(3500);
  let refreshes = (await as.get("/_test/stats")).grants.refresh_token;
  assert.equal((await call(getMe)).result, "alice");
  assert.equal((await as.get("/_test/stats")).grants.refresh_token - refreshes, 1);
  // The rotated refresh token survives a restart (a spent one would revoke the grant).
  await client.close();
  await srv.stop();
  await srv.restart();
  ({ client } = await connectSdk(srv, srv.mint("ops@example.com", ORG)));
  await sleep(3500);
  refreshes = (await as.get("/_test/stats")).grants.refresh_token;
  assert.equal((await call(getMe)).result, "alice");
  assert.equal((await as.get("/_test/stats")).grants.refresh_token - refreshes, 1);
  // A revoked grant asks for a login, and names the command.
  await fetch(`${as.origin}/_test/revoke`);
  await sleep(3500);
  const revoked = (await call(getMe)).result;
  assert.equal(revoked.code, "oauth_reauth_required", JSON.stringify(revoked));
  assert.match(revoked.message, /executor connections login api/);
  await fetch(`${as.origin}/_test/ttl?s=3600`);
  await login("api");
  await login();
  assert.equal((await call(getMe)).result, "alice");
});

test("a client-credentials flow logs in without a browser and renews its token without a person", async () => {
  await cli("integrations", "add", "openapi", "--spec", `${as.origin}/openapi-service.json`, "--namespace", "svcapi", "--allow-local-network");
  await fetch(`${as.origin}/_test/ttl?s=2`);
  const printed = await new Promise((resolve, reject) => {
    const child = execFile(
      BIN,
      ["connections", "login", "svcapi", "--client-id", "svc", "--client-secret-stdin", "--allow-local-network", "--listen", "127.0.0.1:0", "--org", ORG, "--data-dir", srv.dataDir],
      { timeout: 60_000, env: srv.env },
      (error, stdout, stderr) => {
        outputs.push(stdout, stderr);
        error ? reject(new Error(stderr)) : resolve(stdout);
      },
    );
    child.stdin.end("svc-secret-0123456789\n");
  });
  assert.match(printed, /^svcapi\toauth\tready\tscopes=api:read/m);
  assert.doesNotMatch(printed, /^https?:/m, "no authorization URL");
  const first = await call("return (await tools.svcapi.me.getMe({})).data.account");
  assert.equal(first.result, "svc", JSON.stringify(first));
  const before = (await as.get("/_test/stats")).grants.client_credentials;
  await sleep(2500);
  const again = await call("return (await tools.svcapi.me.getMe({})).data.account");
  assert.equal(again.result, "svc", JSON.stringify(again));
  assert.equal((await as.get("/_test/stats")).grants.client_credentials - before, 1, "a new token, asked by the server");
  await fetch(`${as.origin}/_test/ttl?s=3600`);
});

test("a GraphQL endpoint's challenge leads the login to its authorization server", async () => {
  const schema = join(jar, "schema.graphql");
  writeFileSync(schema, "type Query { me: String }\n");
  await cli("integrations", "add", "graphql", "--endpoint", `${as.origin}/graphql`, "--schema", schema, "--namespace", "gql", "--allow-local-network");
  const before = await call("const r = await tools.gql.query.me({}); return r.ok ? 'ok' : r.error.code;");
  assert.notEqual(before.result, "ok");
  const printed = await login("gql");
  assert.match(printed, /^gql\toauth\tready\tscopes=gql:read/m);
  const out = await call("return (await tools.gql.query.me({})).data");
  assert.equal(out.result, "alice", JSON.stringify(out));
});

/** The management API as `token`; every answer joins `outputs` (scanned for secrets last). */
const apiAs = (token) => async (method, path, body) => {
  const res = await fetch(`${srv.base}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  outputs.push(text);
  return { status: res.status, body: text ? JSON.parse(text) : null };
};

/** A browser that follows `url` through consent back to the callback. */
const browse = (url) =>
  new Promise((resolve, reject) =>
    execFile("curl", ["-sS", "-L", "--max-redirs", "10", "-c", join(jar, "cookies"), "-b", join(jar, "cookies"), "-o", "/dev/null", url], (e) =>
      e ? reject(e) : resolve(),
    ),
  );

test("issue 37: a login started over the API completes through the server's callback, and its state is readable", async () => {
  const api = apiAs(srv.mint("ops@example.com", ORG));
  const started = await api("POST", "/integrations/gql/connection/login", {});
  assert.equal(started.status, 200, JSON.stringify(started.body));
  assert.equal(started.body.state, "browser");
  assert.match(started.body.authorizationUrl, /^http:\/\/127\.0\.0\.1:\d+\/auth\?/);
  assert.ok(started.body.authorizationUrl.includes(encodeURIComponent(`${srv.base}/oauth/callback`)), "the server's own callback");
  const path = `/integrations/gql/connection/login/${started.body.loginId}`;
  assert.deepEqual((await api("GET", path)).body, { state: "pending" });
  await browse(started.body.authorizationUrl);
  const settled = await api("GET", path);
  assert.equal(settled.body.state, "connected", JSON.stringify(settled.body));
  const status = await api("GET", "/integrations/gql/connection");
  assert.equal(status.body.kind, "oauth");
  assert.equal((await call("return (await tools.gql.query.me({})).data")).result, "alice");
  // A made-up login id, or this one under another integration, is not found.
  assert.equal((await api("GET", `/integrations/gql/connection/login/${"0".repeat(64)}`)).status, 404);
  assert.equal((await api("GET", `/integrations/secure/connection/login/${started.body.loginId}`)).status, 404);
  // Another org's token does not see it either.
  const other = srv.mint("someone-else@example.com");
  const foreign = await fetch(`${srv.base}/api/v1${path}`, { headers: { authorization: `Bearer ${other}` } });
  assert.equal(foreign.status, 404);
  // An integration with no login: a stdio server would be 409; a missing one 404.
  assert.equal((await api("POST", "/integrations/nothing/connection/login", {})).status, 404);
});

test("issue 37: `connections login` with neither --listen nor --public-url finds the running server by the URL it recorded", async () => {
  const child = spawn(
    BIN,
    ["connections", "login", "gql", "--allow-local-network", "--no-browser", "--timeout", "30", "--org", ORG, "--data-dir", srv.dataDir],
    { stdio: ["ignore", "pipe", "pipe"], env: srv.env },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  await waitUntil("the authorization URL", () => /^https?:\/\//m.test(stdout) || child.exitCode !== null, { ms: 20_000 });
  const url = stdout.split("\n").find((l) => /^https?:\/\//.test(l));
  assert.ok(url, `login printed no URL: ${stderr}`);
  assert.ok(url.includes(encodeURIComponent(`${srv.base}/oauth/callback`)), `the server's callback, not 127.0.0.1:4788: ${url}`);
  assert.match(stderr, new RegExp(`the server at ${srv.base.replace(/[.]/g, "\\.")} completes it`));
  await browse(url);
  assert.equal(await exited, 0, stderr);
  outputs.push(stdout, stderr);
  assert.match(stdout, /^gql\toauth\tready/m);
});

test("issue 37: a connection test says whether the upstream takes the credential, from the API and the shell", async () => {
  const api = apiAs(srv.mint("ops@example.com", ORG));
  await cli("integrations", "add", "openapi", "--spec", `${as.origin}/openapi-keyed.json`, "--namespace", "keyed", "--allow-local-network");
  assert.equal((await api("PUT", "/integrations/keyed/connection", { type: "apiKey", value: "wrong-key-0000" })).status, 200);
  const refused = await api("POST", "/integrations/keyed/connection/test");
  assert.equal(refused.status, 200, JSON.stringify(refused.body));
  assert.equal(refused.body.ok, false);
  assert.equal(refused.body.status, 401);
  assert.match(refused.body.message, /refused the credential/);
  assert.equal(refused.body.request, `GET ${as.origin}/keyed`);
  await assert.rejects(cli("connections", "test", "keyed", "--allow-local-network"), /did not work: the upstream refused the credential \(HTTP 401\)/);
  await api("PUT", "/integrations/keyed/connection", { type: "apiKey", value: "key-0123456789" });
  const taken = await api("POST", "/integrations/keyed/connection/test");
  assert.equal(taken.body.ok, true, JSON.stringify(taken.body));
  assert.equal(taken.body.status, 200);
  assert.match(await cli("connections", "test", "keyed", "--allow-local-network"), /^keyed\tok\tthe upstream answered HTTP 200/m);
  // An MCP server lists its tools with the OAuth connection.
  const mcp = await api("POST", "/integrations/secure/connection/test");
  assert.equal(mcp.body.ok, true, JSON.stringify(mcp.body));
  assert.match(mcp.body.message, /listed \d+ tools/);
  // `connections status` shows an OAuth grant's state.
  assert.match(await cli("connections", "status", "secure"), /^secure\toauth\tready\tscopes=mcp:tools/m);
  // PATCH moves the OpenAPI integration to another base URL; its calls follow.
  const moved = await api("PATCH", "/integrations/keyed", { baseUrl: `${as.origin}/elsewhere` });
  assert.equal(moved.status, 200, JSON.stringify(moved.body));
  assert.equal(moved.body.integration.baseUrl, `${as.origin}/elsewhere`);
  assert.equal((await api("GET", "/integrations/keyed")).body.baseUrl, `${as.origin}/elsewhere`);
  const mcpMove = await api("PATCH", "/integrations/secure", { baseUrl: "https://example.com" });
  assert.equal(mcpMove.status, 422);
  assert.equal(mcpMove.body.field, "baseUrl");
  assert.equal((await api("PATCH", "/integrations/keyed", { bogus: 1 })).status, 422);
});

test("no token reaches the agent, the operator's output, the log or the disk", async () => {
  const echoed = await call("return await tools.secure.echo_auth({})");
  assert.equal(echoed.status, "completed", JSON.stringify(echoed));
  const { issued } = await as.get("/_test/stats");
  assert.ok(issued.length >= 4, `tokens issued: ${issued.length}`);
  const executions = await cliRaw("executions", "list");
  const shown = await Promise.all(
    executions.trim().split("\n").slice(0, 10).map((line) => cliRaw("executions", "show", line.split("\t")[0])),
  );
  const disk = srv.storeDump();
  const seen = [...outputs, ...shown, srv.log, disk].join("\n");
  // Every token issued, and the client secret of the machine client.
  for (const token of [...issued, "svc-secret-0123456789"]) {
    for (const form of [token, Buffer.from(token).toString("base64"), encodeURIComponent(token)]) {
      assert.ok(!seen.includes(form), "an issued token or secret appears in output, log or store");
    }
  }
  assert.ok(JSON.stringify(echoed).includes("Bearer"), "the echo came back, with its token scrubbed");
});
