// SPEC §7–9 end to end: an OpenAPI integration called from `execute`
// against a real upstream on loopback, the credential injected in host code
// only, POST paused for approval, and the secret found nowhere else.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, connectSdk, BIN, recordingUpstream, runOk } from "./harness.mjs";

const SPEC = fileURLToPath(new URL("./fixtures/petstore.yaml", import.meta.url));
const SECRET = "sk-test-" + Math.random().toString(36).slice(2) + "-SECRET";
let upstream;
let seen;
let srv;
let client;
const transcript = [];

before(async () => {
  upstream = await recordingUpstream(({ method, url, body }, res) => {
      if (url === "/spec.yaml") {
        res.setHeader("content-type", "application/yaml");
        return res.end(readFileSync(SPEC));
      }
      if (url.startsWith("/v1/pets/missing")) {
        res.statusCode = 404;
        return res.end(JSON.stringify({ message: "no such pet" }));
      }
      if (method === "POST") {
        res.statusCode = 201;
        return res.end(JSON.stringify({ id: 7, ...JSON.parse(body || "{}") }));
      }
      if (url.startsWith("/v1/pets/")) return res.end(JSON.stringify({ id: 1, name: "Rex" }));
      res.end(JSON.stringify([{ id: 1, name: "Rex" }, { id: 2, name: "Tom" }]));
  });
  seen = upstream.seen;
  srv = await startServer({ args: ["--allow-local-network"] });
  const bearer = srv.mint("openapi@example.com");
  const base = `${upstream.base}/v1`;
  srv.cli(["integrations", "add", "openapi", "--spec", SPEC, "--namespace", "petstore", "--base-url", base, "--data-dir", srv.dataDir]);
  srv.cli(["connections", "set", "petstore", "--api-key", SECRET, "--data-dir", srv.dataDir]);
  ({ client } = await connectSdk(srv, bearer));
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
  upstream?.close();
});

const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  transcript.push(JSON.stringify(r));
  return r;
};
const run = (code) => runOk(client, code, transcript);

test("openapi: GET with query and path params, the key injected by the host", async () => {
  seen.length = 0;
  const list = await run("return await tools.petstore.pets.listPets({ limit: 2 })");
  assert.equal(list.ok, true);
  assert.deepEqual(list.data, [{ id: 1, name: "Rex" }, { id: 2, name: "Tom" }]);
  assert.equal(list.http.status, 200);
  const one = await run("return await tools.petstore.pets.showPetById({ petId: 'a b/c' })");
  assert.deepEqual(one.data, { id: 1, name: "Rex" });
  assert.deepEqual(seen.map((r) => [r.method, r.url]), [["GET", "/v1/pets?limit=2"], ["GET", "/v1/pets/a%20b%2Fc"]]);
  for (const r of seen) assert.equal(r.headers["x-api-key"], SECRET);
});

test("openapi: upstream errors map to SPEC §7 codes; the sandbox never sees the key", async () => {
  const missing = await run("return await tools.petstore.pets.showPetById({ petId: 'missing' })");
  assert.equal(missing.ok, false);
  assert.equal(missing.error.code, "upstream_http_error");
  assert.equal(missing.error.status, 404);
  // The sandbox has no process environment to read a secret from.
  const probe = await run("return typeof process");
  assert.equal(probe, "undefined");
});

test("openapi: arguments are validated against the schema before any approval or request", async () => {
  seen.length = 0;
  const noId = await run("return await tools.petstore.pets.showPetById({})");
  assert.equal(noId.ok, false);
  assert.equal(noId.error.code, "invalid_tool_arguments");
  assert.match(noId.error.message, /petId/);
  // A POST would need approval; a call that can only fail never pauses.
  const bad = await call("execute", { code: "return await tools.petstore.pets.createPet({ body: { id: 'x' } })" });
  assert.equal(bad.structuredContent.status, "completed", JSON.stringify(bad));
  assert.equal(bad.structuredContent.result.error.code, "invalid_tool_arguments");
  assert.equal(seen.length, 0);
});

test("openapi: POST requires approval by default, then sends the body", async () => {
  seen.length = 0;
  const paused = await call("execute", { code: "return await tools.petstore.pets.createPet({ body: { id: 3, name: 'Kit' } })" });
  assert.equal(paused.structuredContent.status, "waiting_for_interaction", JSON.stringify(paused));
  // This server runs with the default window: 4 minutes (SPEC §9).
  const ttl = paused.structuredContent.ttlMs;
  assert.ok(ttl > 230_000 && ttl <= 240_000, `ttlMs ${ttl}`);
  assert.equal(seen.length, 0, "nothing reaches the upstream before approval");
  const done = await call("resume", { executionId: paused.structuredContent.executionId, action: "accept" });
  assert.deepEqual(done.structuredContent.result.data, { id: 3, name: "Kit" });
  assert.equal(seen.length, 1);
  assert.equal(seen[0].method, "POST");
  assert.equal(seen[0].url, "/v1/pets");
  assert.equal(seen[0].headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(seen[0].body), { id: 3, name: "Kit" });
});

test("openapi: executor call runs one tool from a shell through the same pipeline", async () => {
  // Asynchronous: the upstream lives in this process and must keep serving.
  const callCli = (...args) =>
    new Promise((resolve) =>
      execFile(BIN, ["call", ...args, "--email", "openapi@example.com", "--allow-local-network", "--data-dir", srv.dataDir], { env: srv.env }, (error, stdout, stderr) =>
        resolve({ code: error ? error.code ?? 1 : 0, stdout, stderr }),
      ),
    );
  seen.length = 0;
  const ok = await callCli("petstore.pets.listPets", '{"limit": 1}');
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /"ok": true/);
  assert.deepEqual(seen.map((r) => [r.method, r.url, r.headers["x-api-key"] === SECRET]), [["GET", "/v1/pets?limit=1", true]]);
  assert.ok(!ok.stdout.includes(SECRET) && !ok.stderr.includes(SECRET));
  const bad = await callCli("petstore.pets.showPetById", "{}");
  assert.notEqual(bad.code, 0);
  assert.match(bad.stdout, /invalid_tool_arguments/);
});

test("openapi: a spec is imported from a URL through the same SSRF guard", async () => {
  const addFromUrl = (...extra) =>
    new Promise((resolve) =>
      execFile(
        BIN,
        ["integrations", "add", "openapi", "--spec", `${upstream.base}/spec.yaml`, "--namespace", "remote", ...extra, "--data-dir", srv.dataDir],
        { env: srv.env },
        (error, stdout, stderr) => resolve({ code: error ? error.code ?? 1 : 0, stdout, stderr }),
      ),
    );
  const refused = await addFromUrl();
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /allow-local-network/);
  const added = await addFromUrl("--allow-local-network");
  assert.equal(added.code, 0, added.stderr);
  assert.match(added.stdout, /remote: 3 tools/);
  srv.cli(["integrations", "remove", "remote", "--data-dir", srv.dataDir]);
});

test("openapi: the secret appears in no response, log, record or file of the data dir", async () => {
  // The earlier tests of this file filled the transcript; run alone it would be empty.
  assert.ok(transcript.length > 5, `only ${transcript.length} responses recorded`);
  for (const r of transcript) assert.ok(!r.includes(SECRET), `a response carries the secret: ${r.slice(0, 200)}`);
  assert.ok(!srv.logTail(1e7).includes(SECRET), "server log carries the secret");
  const records = srv.cli(["executions", "list", "--limit", "100", "--data-dir", srv.dataDir]);
  for (const line of records.trim().split("\n")) {
    const id = line.split("\t")[0];
    assert.ok(!srv.cli(["executions", "show", id, "--data-dir", srv.dataDir]).includes(SECRET));
  }
  const walk = (dir) => readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? walk(join(dir, f)) : [join(dir, f)]));
  for (const file of walk(srv.dataDir)) {
    assert.ok(!readFileSync(file).includes(SECRET), `${file} carries the secret in clear`);
  }
  assert.match(srv.cli(["connections", "list", "--data-dir", srv.dataDir]), /^petstore\tapi_key\tsealed$/m);
});

test("openapi: without --allow-local-network the SSRF guard refuses loopback", async () => {
  const guarded = await startServer();
  try {
    const bearer = guarded.mint("guarded@example.com");
    const base = `${upstream.base}/v1`;
    guarded.cli(["integrations", "add", "openapi", "--spec", SPEC, "--namespace", "petstore", "--base-url", base, "--data-dir", guarded.dataDir]);
    guarded.cli(["connections", "set", "petstore", "--api-key", SECRET, "--data-dir", guarded.dataDir]);
    const { client: c } = await connectSdk(guarded, bearer);
    seen.length = 0;
    const r = await c.callTool({ name: "execute", arguments: { code: "return await tools.petstore.pets.listPets({})" } });
    const result = r.structuredContent.result;
    assert.equal(result.ok, false);
    assert.equal(result.error.code, "upstream_http_error");
    assert.equal(result.error.retryable, false);
    assert.match(result.error.message, /allow-local-network/);
    assert.equal(seen.length, 0, "the upstream saw no request");
    await c.close();
  } finally {
    await guarded.cleanup();
  }
});

test("openapi: a connection by reference (env://) resolves at call time; removing it stops the credential", async () => {
  const referenced = "sk-ref-" + Math.random().toString(36).slice(2);
  const other = await startServer({ args: ["--allow-local-network"], env: { PETSTORE_KEY: referenced } });
  try {
    const bearer = other.mint("ref@example.com");
    const base = `${upstream.base}/v1`;
    const cli = (...args) => other.cli([...args, "--data-dir", other.dataDir]);
    cli("integrations", "add", "openapi", "--spec", SPEC, "--namespace", "petstore", "--base-url", base);
    cli("connections", "set", "petstore", "--secret-ref", "env://PETSTORE_KEY");
    assert.match(cli("connections", "list"), /^petstore\tapi_key\tenv:\/\/PETSTORE_KEY$/m);
    const { client: c } = await connectSdk(other, bearer);
    const call = async () => (await c.callTool({ name: "execute", arguments: { code: "return await tools.petstore.pets.listPets({})" } })).structuredContent.result;
    seen.length = 0;
    const ok = await call();
    assert.equal(ok.ok, true, JSON.stringify(ok));
    assert.equal(seen.length, 1);
    assert.equal(seen[0].headers["x-api-key"], referenced);
    assert.ok(!JSON.stringify(ok).includes(referenced));
    cli("connections", "remove", "petstore");
    seen.length = 0;
    const missing = await call();
    assert.equal(missing.ok, false);
    assert.equal(missing.error.code, "connection_missing");
    assert.equal(seen.length, 0);
    await c.close();
  } finally {
    await other.cleanup();
  }
});
