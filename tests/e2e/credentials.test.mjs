// Issue 8 §1–2 end to end: an upstream that echoes what it received never
// hands the connection's secret back to the agent (as a value, an object
// key, JSON-escaped, percent-encoded in lower case, Basic's base64, or cut
// at the error-detail bound), and a path value can never walk the upstream
// URL to another operation. The secrets are given to the CLI on stdin.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServer, connectSdk, BIN, recordingUpstream, runOk } from "./harness.mjs";

const KEY = "AKEY-alpha-SECRET-0123456789abcdef";
const PASSWORD = "pw-BETA-secret-9876543210";
const BASIC_TOKEN = Buffer.from(`user:${PASSWORD}`).toString("base64");
const lowerPercent = (s) => [...Buffer.from(s)].map((b) => "%" + b.toString(16).padStart(2, "0")).join("");

/** Every form of a secret an agent must never see, whole or cut by one character. */
const forbidden = [KEY, KEY.slice(0, -1), lowerPercent(KEY).slice(0, -3), PASSWORD, PASSWORD.slice(0, -1), BASIC_TOKEN.replace(/=+$/, "")];
const assertClean = (text, where) => {
  for (const f of forbidden) assert.ok(!text.includes(f), `${where} holds ${f}: ${text.slice(0, 300)}`);
  assert.ok(!text.toLowerCase().includes(lowerPercent(KEY).slice(0, -3)), `${where} holds the percent-encoded key`);
};

const spec = (namespace, scheme) => ({
  openapi: "3.0.3",
  info: { title: namespace, version: "1" },
  servers: [{ url: "/api/v1" }],
  components: { securitySchemes: { main: scheme } },
  security: [{ main: [] }],
  paths: {
    "/repos/{owner}/{repo}": {
      get: {
        operationId: "getRepo",
        tags: ["repos"],
        parameters: [
          { name: "owner", in: "path", required: true, schema: { type: "string" } },
          { name: "repo", in: "path", required: true, schema: { type: "string" } },
        ],
        responses: { 200: { description: "ok" } },
      },
    },
    "/admin/keys": { get: { operationId: "listKeys", tags: ["admin"], responses: { 200: { description: "ok" } } } },
    "/items/{id}": {
      get: {
        operationId: "getItem",
        tags: ["items"],
        parameters: [
          { name: "id", in: "path", required: true, schema: { type: "string" } },
          { name: "q", in: "query", schema: { type: "string" } },
        ],
        responses: { 200: { description: "ok" } },
      },
    },
    "/pets/{petId}": {
      delete: {
        operationId: "deletePet",
        tags: ["pets"],
        parameters: [{ name: "petId", in: "path", required: true, schema: { type: "string" } }],
        responses: { 204: { description: "gone" } },
      },
    },
    "/echo/key-as-key": { get: { operationId: "keyAsKey", tags: ["echo"], responses: { 200: { description: "ok" } } } },
    "/echo/escaped": { get: { operationId: "escaped", tags: ["echo"], responses: { 200: { description: "ok" } } } },
  },
});

let upstream;
let srv;
let client;
const results = [];

const cliWithStdin = (argv, input) =>
  execFileSync(BIN, [...argv, "--data-dir", srv.dataDir], { encoding: "utf8", input, env: srv.env, stdio: ["pipe", "pipe", "pipe"], timeout: 30_000 });

before(async () => {
  upstream = await recordingUpstream(({ url, headers }, res) => {
    const path = url.split("?")[0];
    const secretHeader = headers["x-api-key"] ?? (headers.authorization ?? "").split(" ")[1] ?? "";
    if (path.endsWith("/echo/key-as-key")) return res.end(JSON.stringify({ [secretHeader]: "x-api-key", nested: [{ [secretHeader]: secretHeader }] }));
    if (path.endsWith("/echo/escaped")) {
      res.setHeader("content-type", "text/plain");
      return res.end(`json ${JSON.stringify(JSON.stringify(secretHeader))} lower ${lowerPercent(secretHeader)} header ${secretHeader}`);
    }
    if (path.includes("/items/")) {
      res.statusCode = 500;
      res.setHeader("content-type", "text/plain");
      return res.end("request " + url + " headers " + JSON.stringify(headers));
    }
    res.end(JSON.stringify({ path }));
  });
  srv = await startServer({ args: ["--allow-local-network"] });
  const dir = srv.dataDir;
  const bearer = srv.mint("creds@example.com");
  const keySpec = join(dir, "trav.json");
  const basicSpec = join(dir, "basic.json");
  writeFileSync(keySpec, JSON.stringify(spec("trav", { type: "apiKey", in: "header", name: "x-api-key" })));
  writeFileSync(basicSpec, JSON.stringify(spec("bas", { type: "http", scheme: "basic" })));
  const base = `${upstream.base}/api/v1`;
  srv.cli(["integrations", "add", "openapi", "--spec", keySpec, "--namespace", "trav", "--base-url", base, "--data-dir", dir]);
  srv.cli(["integrations", "add", "openapi", "--spec", basicSpec, "--namespace", "bas", "--base-url", base, "--data-dir", dir]);
  // Secrets from stdin: the only place they appear is the pipe.
  cliWithStdin(["connections", "set", "trav", "--api-key", "-"], KEY + "\n");
  cliWithStdin(["connections", "set", "bas", "--basic", "-"], `user:${PASSWORD}\n`);
  srv.cli(["policies", "add", "trav.admin.*", "block", "--data-dir", dir]);
  ({ client } = await connectSdk(srv, bearer));
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
  upstream?.close();
});

const run = async (code) => {
  const transcript = [];
  const out = await runOk(client, code, transcript);
  results.push(...transcript);
  return out;
};

test("credentials: the secret read from stdin reaches the upstream, and the CLI never echoes it", async () => {
  upstream.seen.length = 0;
  const out = await run("return await tools.trav.repos.getRepo({ owner: 'o', repo: 'r' })");
  assert.equal(out.ok, true);
  assert.equal(upstream.seen[0].headers["x-api-key"], KEY);
  await run("return await tools.bas.repos.getRepo({ owner: 'o', repo: 'r' })");
  assert.equal(upstream.seen[1].headers.authorization, `Basic ${BASIC_TOKEN}`);
  const listed = srv.cli(["connections", "list", "--data-dir", srv.dataDir]);
  assertClean(listed, "connections list");
  // A secret too short to be scrubbed from results is refused.
  assert.throws(() => cliWithStdin(["connections", "set", "trav", "--api-key", "-"], "abc\n"), /fewer than 4 characters/);
  assert.equal(upstream.seen.length, 2);
});

test("credentials: the key as an object key, JSON-escaped, lower-case percent-encoded, Basic's base64", async () => {
  for (const ns of ["trav", "bas"]) {
    const keyed = await run(`return await tools.${ns}.echo.keyAsKey({})`);
    assert.equal(keyed.ok, true);
    assert.ok(JSON.stringify(keyed.data).includes("[redacted]"), JSON.stringify(keyed.data));
    assertClean(JSON.stringify(keyed), `${ns} keyAsKey`);
    const escaped = await run(`return await tools.${ns}.echo.escaped({})`);
    assert.equal(escaped.ok, true);
    assert.equal(escaped.data.match(/\[redacted\]/g)?.length, 3, escaped.data);
    assertClean(JSON.stringify(escaped), `${ns} escaped`);
  }
});

test("credentials: an error body cut at the detail bound never keeps part of the key", async () => {
  // The reproduction: the echo of URL and headers is cut at 4,096
  // bytes; one n puts the cut inside the key.
  const details = await run(`
    const seen = [];
    for (let n = 3900; n <= 4100; n += 1) {
      const r = await tools.trav.items.getItem({ id: 'x', q: 'p'.repeat(n) });
      if (r.ok) throw new Error('expected an upstream error');
      seen.push(typeof r.error.details === 'string' ? r.error.details : JSON.stringify(r.error.details));
    }
    return seen;
  `);
  assert.equal(details.length, 201);
  assert.ok(details.some((d) => d.includes("[redacted]")), "some echoes must show the redaction");
  for (const d of details) assertClean(d, "error details");
});

test("paths: a value that would be a dot segment is refused before any request or approval", async () => {
  upstream.seen.length = 0;
  const cases = [
    "tools.trav.repos.getRepo({ owner: '..', repo: 'admin' })",
    "tools.trav.items.getItem({ id: '.' })",
    "tools.trav.items.getItem({ id: '..' })",
    // DELETE needs approval by default: refused before the pause.
    "tools.trav.pets.deletePet({ petId: '..' })",
  ];
  for (const call of cases) {
    const out = await run(`return await ${call}`);
    assert.equal(out.ok, false, call);
    assert.equal(out.error.code, "invalid_tool_arguments", call);
    assert.match(out.error.message, /cannot be `\.` or `\.\.`/);
  }
  assert.deepEqual(upstream.seen, [], "nothing reached the upstream");
  // The blocked subtree stays blocked, and a normal value still works.
  const blocked = await run("return await tools.trav.admin.listKeys({})");
  assert.equal(blocked.error.code, "tool_blocked");
  const fine = await run("return await tools.trav.repos.getRepo({ owner: 'a..b', repo: '%2e%2e' })");
  assert.equal(fine.ok, true);
  assert.equal(upstream.seen.at(-1).url, "/api/v1/repos/a..b/%252e%252e");
});

test("credentials: no execution record and no log line holds the secret", async () => {
  for (const r of results) assertClean(r, "a tool result");
  const list = srv.cli(["executions", "list", "--limit", "50", "--data-dir", srv.dataDir]);
  const ids = [...list.matchAll(/exec_[0-9a-f-]+/g)].map((m) => m[0]);
  assert.ok(ids.length >= 5, list);
  for (const id of ids) assertClean(srv.cli(["executions", "show", id, "--data-dir", srv.dataDir]), `executions show ${id}`);
  assertClean(srv.log, "the server log");
});
