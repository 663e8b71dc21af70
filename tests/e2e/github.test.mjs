// GitHub's real spec (npm @octokit/openapi, ~1,200 operations) through the
// MCP server: imported from the CLI, found by plain-language `tools.search`
// inside `execute`, described, and called against a loopback stand-in for
// api.github.com that records what it receives.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, connectSdk, recordingUpstream, runOk, specsDir } from "./harness.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const QUERIES = JSON.parse(readFileSync(join(HERE, "fixtures", "github-search-queries.json"), "utf8"));
const TOKEN = "ghp_e2e" + Math.random().toString(36).slice(2);

let srv;
let client;
let upstream;
let seen;

before(async () => {
  const spec = join(specsDir(), "node_modules", "@octokit", "openapi", "generated", "api.github.com.json");
  assert.ok(existsSync(spec), `no GitHub spec at ${spec}`);
  upstream = await recordingUpstream(({ method, body }, res) => {
    if (method === "POST") {
      res.statusCode = 201;
      return res.end(JSON.stringify({ number: 42, ...JSON.parse(body || "{}") }));
    }
    res.end(JSON.stringify([{ number: 1, title: "First", state: "open" }]));
  });
  seen = upstream.seen;
  srv = await startServer({ args: ["--allow-local-network"] });
  const bearer = srv.mint("github@example.com");
  const out = srv.cli(["integrations", "add", "openapi", "--spec", spec, "--namespace", "github", "--base-url", `${upstream.base}`, "--data-dir", srv.dataDir]);
  assert.match(out, /github: \d{4} tools/);
  srv.cli(["connections", "set", "github", "--bearer", TOKEN, "--data-dir", srv.dataDir]);
  srv.cli(["policies", "add", "github.issues.create", "allow", "--data-dir", srv.dataDir]);
  ({ client } = await connectSdk(srv, bearer));
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
  upstream?.close();
});

const run = (code) => runOk(client, code);

test("github: plain-language searches inside execute find the right operations", async () => {
  const queries = QUERIES.map((q) => q.query);
  const ranked = await run(`
    const out = {};
    for (const q of ${JSON.stringify(queries)}) {
      const r = await tools.search({ query: q, limit: 3 });
      out[q] = r.items.map((i) => i.path);
    }
    return out;
  `);
  let first = 0;
  let top3 = 0;
  const misses = [];
  for (const q of QUERIES) {
    const wanted = [q.expected, ...(q.acceptable ?? [])];
    const found = ranked[q.query];
    assert.ok(Array.isArray(found), `${q.query}: ${JSON.stringify(found)}`);
    if (wanted.includes(found[0])) first++;
    if (found.some((p) => wanted.includes(p))) top3++;
    else misses.push(`${q.query} → ${found.join(", ")} (want ${q.expected})`);
  }
  // The same bar as the engine-level test of this query set.
  assert.ok(top3 >= Math.ceil(QUERIES.length * 0.85), `top-3 ${top3}/${QUERIES.length}\n${misses.join("\n")}`);
  assert.ok(first >= Math.ceil(QUERIES.length * 0.8), `first ${first}/${QUERIES.length}\n${misses.join("\n")}`);
  for (const q of ["list pull requests", "create an issue", "get a repository"]) {
    assert.equal(ranked[q][0], QUERIES.find((x) => x.query === q).expected, q);
  }
});

test("github: describe renders the operation as TypeScript", async () => {
  const d = await run(`return await tools.describe.tool({ path: "github.pulls.list" })`);
  assert.equal(d.path, "github.pulls.list", JSON.stringify(d).slice(0, 500));
  assert.match(d.inputTypeScript, /\bowner: string/);
  assert.match(d.inputTypeScript, /\brepo: string/);
  assert.match(d.inputTypeScript, /\bstate\?: "open" \| "closed" \| "all"/);
  assert.match(d.inputTypeScript, /\bper_page\?: number/);
});

test("github: calls reach the upstream with the path, query, body and the bearer token", async () => {
  seen.length = 0;
  const r = await run(`
    const list = await tools.github.pulls.list({ owner: "octo", repo: "hello", state: "closed", per_page: 5 });
    const created = await tools.github.issues.create({ owner: "octo", repo: "hello", body: { title: "Bug", labels: ["x"] } });
    return { list, created };
  `);
  assert.equal(r.list.ok, true, JSON.stringify(r.list));
  assert.equal(r.list.data[0].title, "First");
  assert.equal(r.created.ok, true, JSON.stringify(r.created));
  assert.equal(r.created.data.number, 42);
  assert.equal(seen.length, 2, JSON.stringify(seen.map((s) => `${s.method} ${s.url}`)));
  const [list, created] = seen;
  assert.equal(list.method, "GET");
  const url = new URL(list.url, "http://x");
  assert.equal(url.pathname, "/repos/octo/hello/pulls");
  assert.equal(url.searchParams.get("state"), "closed");
  assert.equal(url.searchParams.get("per_page"), "5");
  assert.equal(list.headers.authorization, `Bearer ${TOKEN}`);
  assert.equal(created.method, "POST");
  assert.equal(created.url, "/repos/octo/hello/issues");
  assert.deepEqual(JSON.parse(created.body), { title: "Bug", labels: ["x"] });
  assert.match(created.headers["content-type"], /application\/json/);
  // The token never comes back to the agent.
  assert.ok(!JSON.stringify(r).includes(TOKEN));
});

test("github: a missing required argument is refused before any request", async () => {
  seen.length = 0;
  const r = await run(`return await tools.github.pulls.list({ owner: "octo" })`);
  assert.equal(r.ok, false);
  assert.equal(r.error.code, "invalid_tool_arguments");
  assert.match(JSON.stringify(r.error), /repo/);
  assert.equal(seen.length, 0);
});
