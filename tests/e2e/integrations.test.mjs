// SPEC §8: an OpenAPI document imported from the CLI while the server runs
// becomes tools the agent can search and describe, without a restart.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { startServer, connectSdk, sleep, runOk } from "./harness.mjs";

const SPEC = fileURLToPath(new URL("./fixtures/petstore.yaml", import.meta.url));
let srv;
let client;
before(async () => {
  srv = await startServer();
  ({ client } = await connectSdk(srv, srv.mint("integrations@example.com")));
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
});

const cli = (...args) => srv.cli([...args, "--data-dir", srv.dataDir]);
const run = (code) => runOk(client, code);

test("integrations: open sessions get tools/list_changed and a fresh execute description", async () => {
  const { client: listening, listening: getStreamOpen } = await connectSdk(srv, srv.mint("integrations@example.com"));
  let notified = 0;
  listening.setNotificationHandler(ToolListChangedNotificationSchema, () => { notified++; });
  const before = (await listening.listTools()).tools.find((t) => t.name === "execute").description;
  assert.doesNotMatch(before, /- weather/);
  await getStreamOpen(); // the notification goes out on the GET stream
  cli("integrations", "add", "openapi", "--spec", SPEC, "--namespace", "weather");
  // Well inside the Postgres store's fallback poll (10 s): there the
  // commit's notice carries the change (SQLite polls every second).
  const deadline = Date.now() + 5_000;
  while (notified === 0 && Date.now() < deadline) await sleep(100);
  assert.ok(notified >= 1, "no notifications/tools/list_changed arrived");
  const after = (await listening.listTools()).tools.find((t) => t.name === "execute").description;
  assert.match(after, /## Available integrations\n- weather/);
  cli("integrations", "remove", "weather");
  await listening.close();
});

test("integrations: import, list, search, describe, remove — live", async () => {
  const out = cli("integrations", "add", "openapi", "--spec", SPEC, "--namespace", "petstore");
  assert.match(out, /petstore: 3 tools/);
  assert.match(cli("integrations", "list"), /^petstore\topenapi\t3 tools\thttp:\/\/127\.0\.0\.1:9\/v1\t/m);

  const found = await run("return await tools.search({ query: 'create pet' })");
  assert.equal(found.items[0].path, "petstore.pets.createPet", JSON.stringify(found));
  const listed = await run("return (await tools.search({ namespace: 'petstore' })).items.map((i) => i.path)");
  assert.deepEqual(listed, ["petstore.pets.createPet", "petstore.pets.listPets", "petstore.pets.showPetById"]);

  const described = await run("return await tools.describe.tool({ path: 'petstore.pets.createPet' })");
  assert.match(described.inputTypeScript, /body/);
  assert.match(JSON.stringify(described.typeScriptDefinitions), /Pet/);

  const integrations = await run("return await tools.executor.integrations.list({})");
  assert.deepEqual(integrations.items.map((i) => [i.namespace, i.toolCount]), [["executor", 3], ["petstore", 3]]);

  // The execute description lists the integration in sessions built afterwards.
  const second = await connectSdk(srv, srv.mint("integrations@example.com"));
  const { tools } = await second.client.listTools();
  assert.match(tools.find((t) => t.name === "execute").description, /## Available integrations\n- petstore/);
  await second.client.close();

  assert.match(cli("tools", "search", "pets"), /petstore\.pets\./);
  cli("integrations", "remove", "petstore");
  const gone = await run("return (await tools.search({ namespace: 'petstore' })).total");
  assert.equal(gone, 0);
  const search = cli("tools", "search", "pets");
  assert.doesNotMatch(search, /petstore/);
});

test("integrations refresh: re-reads the source; an operator's base URL is kept, a document's follows the document", async () => {
  const dir = mkdtempSync(join(tmpdir(), "executor-refresh-"));
  const spec = join(dir, "spec.yaml");
  const original = readFileSync(SPEC, "utf8");
  writeFileSync(spec, original);
  cli("integrations", "add", "openapi", "--spec", spec, "--namespace", "pinned", "--base-url", "http://127.0.0.1:7/pinned");
  cli("integrations", "add", "openapi", "--spec", spec, "--namespace", "follows");
  const line = (ns) => cli("integrations", "list").split("\n").find((l) => l.startsWith(`${ns}\t`)) ?? "";
  assert.match(line("pinned"), /\t3 tools\thttp:\/\/127\.0\.0\.1:7\/pinned\t/);
  assert.match(line("follows"), /\t3 tools\thttp:\/\/127\.0\.0\.1:9\/v1\t/);

  // The document moves its server and gains an operation.
  const changed = original
    .replace("http://127.0.0.1:9/v1", "http://127.0.0.1:8/v2")
    .replace("paths:\n", "paths:\n  /health:\n    get:\n      operationId: getHealth\n      summary: Health check\n      responses: { \"200\": { description: ok } }\n");
  assert.notEqual(changed, original);
  writeFileSync(spec, changed);
  cli("integrations", "refresh", "pinned");
  cli("integrations", "refresh", "follows");
  assert.match(line("pinned"), /\t4 tools\thttp:\/\/127\.0\.0\.1:7\/pinned\t/);
  assert.match(line("follows"), /\t4 tools\thttp:\/\/127\.0\.0\.1:8\/v2\t/);
  const found = await run("return (await tools.search({ namespace: 'follows', query: 'health' })).items.map((i) => i.path)");
  assert.ok(found.some((p) => p.startsWith("follows.") && p.endsWith("getHealth")), JSON.stringify(found));
  cli("integrations", "remove", "pinned");
  cli("integrations", "remove", "follows");
  rmSync(dir, { recursive: true, force: true });
});
