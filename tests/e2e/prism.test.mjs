// SPEC §7–9 against a real, validating API mock: Stoplight Prism serves an
// OpenAPI document (tests/e2e/fixtures/prism-store.yaml, OpenAPI 3.1) and a
// Swagger 2.0 one (ReadMe's petstore example), rejects every request that
// breaks it (422 bad parameters/body, 401 missing credential, 404 unknown
// route) and answers valid ones with the document's examples. The tools are
// called from `execute` through the official SDK client.
//
// What reached the upstream is read from two places: Prism's own log (run
// with `-v debug`: method, path, request headers and body, whether the request
// passed validation, the answer) and a transparent tap in front of Prism that
// records the raw request line, because Prism's log never shows the query
// string. The executor's base URL is the tap's; every byte goes on to Prism.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, connectSdk, freePort, request, sleep, specsDir } from "./harness.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const PRISM_BIN = join(HERE, "node_modules", ".bin", "prism");
const STORE_SPEC = join(HERE, "fixtures", "prism-store.yaml");
const SECRET = "sk-prism-" + Math.random().toString(36).slice(2) + "-SECRET";
const BASIC_USER = "prism-user";
const BASIC_PASSWORD = "pw-" + Math.random().toString(36).slice(2);

/** ReadMe's Swagger 2.0 petstore, from the specs the importer's tests use. */
const swaggerPetstore = () => {
  const dir = specsDir();
  const file = join(dir, "node_modules", "@readme", "oas-examples", "2.0", "yaml", "petstore.yaml");
  if (!existsSync(file)) throw new Error(`no Swagger 2.0 petstore at ${file}`);
  return file;
};

const waitFor = async (what, pred, ms = 10_000, detail = () => "") => {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = pred();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}\n${detail()}`);
    await sleep(20);
  }
};

// ------------------------------------------------------------------ Prism

const ANSI = /\x1b\[[0-9;]*m/g;

/** Folds one line of Prism's log into its list of received requests. */
const parseLine = (records, line) => {
  let m;
  if ((m = /\[HTTP SERVER\] (\S+) (\S+) \S+\s+info\s+Request received$/.exec(line))) {
    records.push({ method: m[1].toUpperCase(), path: m[2], prismHeaders: {}, prismBody: undefined, valid: undefined, violations: [], status: undefined, error: undefined });
    return;
  }
  const r = records.at(-1);
  if (!r) return;
  if ((m = /\[NEGOTIATOR\] \S+\s+debug\s+< \t([^:]+): (.*)$/.exec(line))) r.prismHeaders[m[1].toLowerCase()] = m[2];
  else if ((m = /\[NEGOTIATOR\] \S+\s+debug\s+< Body: (.*)$/.exec(line))) r.prismBody = m[1];
  else if (/\[VALIDATOR\] \S+\s+success\s+The request passed the validation rules/.test(line)) r.valid = true;
  else if (/\[VALIDATOR\] \S+\s+warning\s+Request did not pass the validation rules/.test(line)) r.valid = false;
  else if ((m = /\[VALIDATOR\] \S+\s+error\s+(.*)$/.exec(line))) r.violations.push(m[1]);
  else if ((m = /> Responding with "(\d+)"/.exec(line))) r.status = Number(m[1]);
  else if ((m = /\[HTTP SERVER\] \S+ \S+ \S+\s+error\s+Request terminated with error: \S*#(\w+)/.exec(line))) r.error = m[1];
};

/**
 * `prism mock` on a free loopback port, plus the recording tap in front of it.
 * Returns { port, base (the tap), records, tapped, mark(), since(mark, n), stop() }.
 */
const startPrism = async (name, spec) => {
  const port = await freePort();
  const child = spawn(PRISM_BIN, ["mock", "-h", "127.0.0.1", "-p", String(port), "--errors", "-v", "debug", spec], {
    env: { ...process.env, FORCE_COLOR: "0", NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const p = { name, port, child, out: "", err: "", records: [], tapped: [] };
  let partial = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (d) => {
    p.out += d;
    const lines = (partial + d).split("\n");
    partial = lines.pop();
    for (const line of lines) parseLine(p.records, line.replace(ANSI, "").trimEnd());
  });
  child.stderr.on("data", (d) => (p.err += d));
  p.logTail = (n = 40) => `--- prism ${name} log (tail) ---\n${p.out.split("\n").slice(-n).join("\n")}\n--- stderr ---\n${p.err.slice(-2000)}`;
  await waitFor(
    `prism (${name}) to listen on ${port}`,
    () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`prism (${name}) exited (${child.exitCode ?? child.signalCode})\n${p.logTail()}`);
      return p.out.includes(`Prism is listening on http://127.0.0.1:${port}`);
    },
    60_000,
    () => p.logTail(),
  );

  const tap = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      p.tapped.push({ method: req.method, url: req.url, headers: req.headers, body: body.toString("utf8") });
      const up = http.request({ host: "127.0.0.1", port, method: req.method, path: req.url, headers: req.headers, agent: false }, (r) => {
        res.writeHead(r.statusCode, r.headers);
        r.pipe(res);
      });
      up.on("error", (e) => {
        res.statusCode = 502;
        res.end(`tap: ${e.message}`);
      });
      up.end(body);
    });
  });
  await new Promise((r) => tap.listen(0, "127.0.0.1", r));
  p.tap = tap;
  p.base = `http://127.0.0.1:${tap.address().port}`;

  p.mark = () => ({ records: p.records.length, tapped: p.tapped.length });
  /** The n requests received since `mark`, each as Prism logged it plus the raw request the tap saw. */
  p.since = async (mark, n) => {
    const describe = () => `tapped: ${JSON.stringify(p.tapped.slice(mark.tapped).map((t) => `${t.method} ${t.url}`))}\n${p.logTail()}`;
    await waitFor(
      `${n} request(s) at prism (${name})`,
      () => p.tapped.length - mark.tapped >= n && p.records.slice(mark.records).filter((r) => r.status !== undefined || r.error !== undefined).length >= n,
      10_000,
      describe,
    );
    const taps = p.tapped.slice(mark.tapped);
    const recs = p.records.slice(mark.records);
    assert.equal(taps.length, n, `requests that reached the upstream: ${describe()}`);
    assert.equal(recs.length, n, `requests prism logged: ${describe()}`);
    return recs.map((r, i) => {
      const u = new URL(taps[i].url, "http://upstream.invalid");
      assert.equal(r.method, taps[i].method, describe());
      assert.equal(r.path, u.pathname, describe());
      const query = {};
      for (const k of u.searchParams.keys()) query[k] = u.searchParams.getAll(k);
      return { ...r, url: taps[i].url, query, headers: taps[i].headers, body: taps[i].body };
    });
  };
  p.stop = async () => {
    tap.closeAllConnections?.();
    await new Promise((r) => tap.close(() => r()));
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    if ((await Promise.race([exited.then(() => true), sleep(5000).then(() => false)])) === false) {
      child.kill("SIGKILL");
      await exited;
    }
  };
  return p;
};

/** Prism received exactly this request and found nothing wrong with it. */
const assertValid = (x, method, path, query = {}) => {
  assert.equal(x.method, method);
  assert.equal(x.path, path);
  assert.deepEqual(x.query, query, `query of ${x.url}`);
  assert.equal(x.valid, true, `prism rejected ${x.method} ${x.url}: ${JSON.stringify(x.violations)}`);
  assert.deepEqual(x.violations, [], `prism reported violations for ${x.method} ${x.url}`);
  assert.equal(x.error, undefined);
};

// ------------------------------------------------------------------ setup

let store; // prism for prism-store.yaml
let pets; // prism for the Swagger 2.0 petstore
let srv;
let client;
const transcript = [];

before(async () => {
  if (!existsSync(PRISM_BIN)) throw new Error(`no prism at ${PRISM_BIN}: run npm ci in tests/e2e`);
  const swagger = swaggerPetstore();
  // Started together; each is kept as soon as it is up so that `after` stops
  // whatever did start when another one failed.
  const started = await Promise.allSettled([
    startPrism("store", STORE_SPEC).then((p) => (store = p)),
    startPrism("petstore-2.0", swagger).then((p) => (pets = p)),
    startServer({ args: ["--allow-local-network"] }).then((s) => (srv = s)),
  ]);
  const failed = started.find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
  const bearer = srv.mint("prism@example.com");
  const cli = (...argv) => srv.cli([...argv, "--data-dir", srv.dataDir]);
  const add = (ns, spec, base) => cli("integrations", "add", "openapi", "--spec", spec, "--namespace", ns, "--base-url", base);
  // One spec, four namespaces: with the right key, with no connection, with
  // a credential of the wrong kind, and with a base URL Prism has no route for.
  add("store", STORE_SPEC, store.base);
  cli("connections", "set", "store", "--api-key", SECRET);
  add("anon", STORE_SPEC, store.base);
  add("wrongkind", STORE_SPEC, store.base);
  cli("connections", "set", "wrongkind", "--basic", `${BASIC_USER}:${BASIC_PASSWORD}`);
  add("lost", STORE_SPEC, `${store.base}/v9`);
  add("pets2", swagger, pets.base);
  cli("connections", "set", "pets2", "--api-key", SECRET);
  add("pets2anon", swagger, pets.base);
  ({ client } = await connectSdk(srv, bearer));
});

after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
  await Promise.all([store?.stop(), pets?.stop()]);
});

const execute = async (code) => {
  const r = await client.callTool({ name: "execute", arguments: { code } });
  transcript.push(JSON.stringify(r));
  return r;
};
/** Runs code that must complete (no pause, no error); returns its result. */
const run = async (code) => {
  const r = await execute(code);
  assert.ok(!r.isError, JSON.stringify(r));
  assert.equal(r.structuredContent?.status, "completed", JSON.stringify(r));
  return r.structuredContent.result;
};

/** Proves nothing reached Prism since `mark`: the next request it logs is a sentinel call. */
const assertNothingSentSince = async (mark) => {
  const health = await run("return await tools.anon.health.getHealth({})");
  assert.equal(health.ok, true, JSON.stringify(health));
  const [x] = await store.since(mark, 1);
  assertValid(x, "GET", "/health");
};

const ITEMS = [
  { id: 1, name: "Widget", price: 9.5, tags: ["tools"] },
  { id: 2, name: "Gadget", price: 20, tags: ["toys", "tools"] },
];
const CREATED = { id: 3, name: "Sprocket", price: 4.25, tags: ["parts"] };

// ------------------------------------------------------------------ tests

test("prism: the spec's operations are tools, found from the shell and from inside execute", async () => {
  const shell = srv.cli(["tools", "search", "items", "--limit", "50", "--data-dir", srv.dataDir]);
  for (const leaf of ["listItems", "getItem", "createItem", "deleteItem"]) assert.match(shell, new RegExp(`\\tstore\\.items\\.${leaf}\\t`));
  const found = await run(`
    const all = await tools.search({ namespace: "store", query: "", limit: 50 });
    const list = await tools.describe.tool({ path: "store.items.listItems" });
    const create = await tools.describe.tool({ path: "store.items.createItem" });
    return { paths: all.items.map((i) => i.path).sort(), list: list.inputTypeScript, create: create.inputTypeScript };
  `);
  assert.deepEqual(found.paths, [
    "store.admin.getStats",
    "store.health.getHealth",
    "store.items.createItem",
    "store.items.deleteItem",
    "store.items.getItem",
    "store.items.listItems",
  ]);
  assert.match(found.list, /\blimit: number;/);
  assert.match(found.list, /\btag\?: string\[\];/);
  assert.match(found.list, /\bfields\?: \("id" \| "name" \| "price" \| "tags"\)\[\];/);
  assert.match(found.list, /"X-Trace-Id"\?: string;/);
  assert.match(found.create, /"Idempotency-Key": string;/);
  assert.match(found.create, /\bbody: NewItem\b/);
});

test("prism: GET with path, query (integer, exploded and comma-separated arrays, enum) and header parameters passes validation", async () => {
  const mark = store.mark();
  const r = await run(`
    const list = await tools.store.items.listItems({ limit: 2, tag: ["tools", "a b"], fields: ["id", "name"], sort: "price", "X-Trace-Id": "trace-e2e1" });
    const bare = await tools.store.items.listItems({ limit: 50 });
    const one = await tools.store.items.getItem({ itemId: 7 });
    return { list, bare, one };
  `);
  assert.equal(r.list.ok, true, JSON.stringify(r.list));
  assert.equal(r.list.http.status, 200);
  assert.deepEqual(r.list.data, ITEMS);
  assert.deepEqual(r.bare.data, ITEMS);
  assert.equal(r.one.ok, true, JSON.stringify(r.one));
  assert.deepEqual(r.one.data, { id: 7, name: "Gizmo", price: 12, tags: [] });

  const [list, bare, one] = await store.since(mark, 3);
  assertValid(list, "GET", "/items", { limit: ["2"], tag: ["tools", "a b"], fields: ["id,name"], sort: ["price"] });
  assert.equal(list.status, 200);
  assert.equal(list.headers["x-trace-id"], "trace-e2e1");
  assert.equal(list.prismHeaders["x-trace-id"], "trace-e2e1");
  assertValid(bare, "GET", "/items", { limit: ["50"] });
  assert.equal(bare.headers["x-trace-id"], undefined, "an absent optional header is not sent");
  assertValid(one, "GET", "/items/7");
  for (const x of [list, bare, one]) {
    assert.equal(x.headers["x-api-key"], SECRET, "the key goes in the header the scheme names");
    assert.equal(x.prismHeaders["x-api-key"], SECRET);
    assert.equal(x.headers.authorization, undefined);
    assert.equal(x.body, "");
  }
});

test("prism: an operation that requires bearer auth gets the connection's secret as a bearer token", async () => {
  const mark = store.mark();
  const stats = await run("return await tools.store.admin.getStats({})");
  assert.equal(stats.ok, true, JSON.stringify(stats));
  assert.deepEqual(stats.data, { items: 3, revenue: 42.5 });
  const [x] = await store.since(mark, 1);
  assertValid(x, "GET", "/stats");
  assert.equal(x.status, 200);
  assert.equal(x.headers.authorization, `Bearer ${SECRET}`);
  assert.equal(x.headers["x-api-key"], undefined);
});

test("prism: arguments that break the input schema are refused before any request, a POST without pausing", async () => {
  const mark = store.mark();
  const r = await execute(`
    const calls = [
      ["limit", () => tools.store.items.listItems({})],
      ["limit", () => tools.store.items.listItems({ limit: 0 })],
      ["limit", () => tools.store.items.listItems({ limit: 51 })],
      ["limit", () => tools.store.items.listItems({ limit: "3" })],
      ["fields", () => tools.store.items.listItems({ limit: 5, fields: ["colour"] })],
      ["X-Trace-Id", () => tools.store.items.listItems({ limit: 5, "X-Trace-Id": "not a trace" })],
      ["itemId", () => tools.store.items.getItem({ itemId: 0 })],
      ["itemId", () => tools.store.items.deleteItem({})],
      ["price", () => tools.store.items.createItem({ "Idempotency-Key": "key-12345678", body: { name: "Sprocket" } })],
      ["Idempotency-Key", () => tools.store.items.createItem({ "Idempotency-Key": "short", body: { name: "Sprocket", price: 1 } })],
      ["colour", () => tools.store.items.createItem({ "Idempotency-Key": "key-12345678", body: { name: "Sprocket", price: 1, colour: "red" } })],
    ];
    const out = [];
    for (const [field, call] of calls) {
      const res = await call();
      out.push({ field, ok: res.ok, code: res.error?.code, message: res.error?.message });
    }
    return out;
  `);
  assert.equal(r.structuredContent?.status, "completed", `a call that can only fail never pauses: ${JSON.stringify(r)}`);
  const out = r.structuredContent.result;
  assert.equal(out.length, 11);
  for (const c of out) {
    assert.equal(c.ok, false, JSON.stringify(c));
    assert.equal(c.code, "invalid_tool_arguments", JSON.stringify(c));
    assert.ok(c.message.includes(c.field), `the message names ${c.field}: ${c.message}`);
  }
  await assertNothingSentSince(mark);

  // The fixture's constraints are real: Prism itself rejects the same requests.
  const direct = (method, path, { headers = {}, body } = {}) =>
    request(`http://127.0.0.1:${store.port}${path}`, {
      method,
      headers: { "x-api-key": SECRET, accept: "application/json", ...(body ? { "content-type": "application/json" } : {}), ...headers },
      body,
    });
  const good = { name: "Sprocket", price: 1 };
  const rejected = [
    await direct("GET", "/items"),
    await direct("GET", "/items?limit=0"),
    await direct("GET", "/items?limit=51"),
    await direct("GET", "/items?limit=5&fields=colour"),
    await direct("GET", "/items?limit=5", { headers: { "x-trace-id": "not a trace" } }),
    await direct("GET", "/items/0"),
    await direct("POST", "/items", { headers: { "idempotency-key": "key-12345678" }, body: { name: "Sprocket" } }),
    await direct("POST", "/items", { headers: { "idempotency-key": "short" }, body: good }),
    await direct("POST", "/items", { body: good }),
    await direct("POST", "/items", { headers: { "idempotency-key": "key-12345678" }, body: { ...good, colour: "red" } }),
  ];
  assert.deepEqual(rejected.map((x) => x.status), Array(rejected.length).fill(422), rejected.map((x) => x.body).join("\n"));
  const accepted = await direct("POST", "/items", { headers: { "idempotency-key": "key-12345678" }, body: good });
  assert.equal(accepted.status, 201, accepted.body);
});

test("prism: a POST pauses for approval, nothing is sent before accept, then body and header pass validation", async () => {
  const mark = store.mark();
  const args = { "Idempotency-Key": "key-approve-1", body: { name: "Sprocket", price: 4.25, tags: ["parts", "new"] } };
  const paused = await execute(`return await tools.store.items.createItem(${JSON.stringify(args)})`);
  const sc = paused.structuredContent;
  assert.equal(sc?.status, "waiting_for_interaction", JSON.stringify(paused));
  assert.equal(sc.interaction.address, "store.items.createItem");
  assert.deepEqual(sc.interaction.args, args);
  await assertNothingSentSince(mark);

  const mark2 = store.mark();
  const done = await client.callTool({ name: "resume", arguments: { executionId: sc.executionId, action: "accept" } });
  transcript.push(JSON.stringify(done));
  assert.ok(!done.isError, JSON.stringify(done));
  assert.equal(done.structuredContent.status, "completed", JSON.stringify(done));
  const created = done.structuredContent.result;
  assert.equal(created.ok, true, JSON.stringify(created));
  assert.equal(created.http.status, 201);
  assert.deepEqual(created.data, CREATED);
  const [x] = await store.since(mark2, 1);
  assertValid(x, "POST", "/items");
  assert.equal(x.status, 201);
  assert.equal(x.headers["content-type"], "application/json");
  assert.equal(x.headers["idempotency-key"], "key-approve-1");
  assert.equal(x.headers["x-api-key"], SECRET);
  assert.deepEqual(JSON.parse(x.body), args.body);
  assert.deepEqual(JSON.parse(x.prismBody), args.body);
});

test("prism: with a policy `store.* allow`, POST and DELETE run without a pause", async () => {
  const added = srv.cli(["policies", "add", "store.*", "allow", "--data-dir", srv.dataDir]);
  assert.match(added, /store\.\*\tallow/);
  const mark = store.mark();
  const r = await run(`
    const created = await tools.store.items.createItem({ "Idempotency-Key": "key-policy-1", body: { name: "Bolt", price: 0.5 } });
    const deleted = await tools.store.items.deleteItem({ itemId: 3 });
    return { created, deleted };
  `);
  assert.equal(r.created.ok, true, JSON.stringify(r.created));
  assert.deepEqual(r.created.data, CREATED);
  assert.equal(r.deleted.ok, true, JSON.stringify(r.deleted));
  assert.equal(r.deleted.http.status, 204);
  assert.equal(r.deleted.data, null);
  const [post, del] = await store.since(mark, 2);
  assertValid(post, "POST", "/items");
  assert.equal(post.status, 201);
  assert.deepEqual(JSON.parse(post.body), { name: "Bolt", price: 0.5 });
  assertValid(del, "DELETE", "/items/3");
  assert.equal(del.status, 204);
  assert.equal(del.headers["x-api-key"], SECRET);
});

test("prism: without a connection a secured operation fails with connection_missing and sends nothing; a public one goes out bare", async () => {
  const mark = store.mark();
  const r = await run(`
    const list = await tools.anon.items.listItems({ limit: 1 });
    const stats = await tools.anon.admin.getStats({});
    const health = await tools.anon.health.getHealth({});
    return { list, stats, health };
  `);
  for (const res of [r.list, r.stats]) {
    assert.equal(res.ok, false, JSON.stringify(res));
    assert.equal(res.error.code, "connection_missing");
    assert.match(res.error.message, /connections set anon/);
  }
  assert.equal(r.health.ok, true, JSON.stringify(r.health));
  assert.deepEqual(r.health.data, { status: "ok" });
  // Only the public call reached Prism, with no credential at all.
  const [x] = await store.since(mark, 1);
  assertValid(x, "GET", "/health");
  assert.equal(x.headers["x-api-key"], undefined);
  assert.equal(x.headers.authorization, undefined);
});

test("prism: a credential the API does not accept gets Prism's 401, surfaced as connection_rejected", async () => {
  const mark = store.mark();
  const r = await run("return await tools.wrongkind.items.listItems({ limit: 1 })");
  assert.equal(r.ok, false, JSON.stringify(r));
  assert.equal(r.error.code, "connection_rejected");
  assert.equal(r.error.status, 401);
  assert.equal(r.error.retryable, false);
  assert.equal(r.error.details?.status, 401, JSON.stringify(r.error));
  assert.match(r.error.details?.type ?? "", /#UNAUTHORIZED$/);
  assert.ok(!JSON.stringify(r).includes(BASIC_PASSWORD), "the password is not echoed");
  const [x] = await store.since(mark, 1);
  assert.equal(x.method, "GET");
  assert.equal(x.path, "/items");
  assert.deepEqual(x.query, { limit: ["1"] });
  assert.equal(x.error, "UNAUTHORIZED");
  assert.equal(x.valid, false);
  assert.deepEqual(x.violations, ["Invalid security scheme used"]);
  assert.equal(x.headers.authorization, `Basic ${Buffer.from(`${BASIC_USER}:${BASIC_PASSWORD}`).toString("base64")}`);
  assert.equal(x.headers["x-api-key"], undefined);
});

test("prism: a route Prism does not know gets its 404, surfaced as upstream_http_error", async () => {
  const mark = store.mark();
  const r = await run("return await tools.lost.health.getHealth({})");
  assert.equal(r.ok, false, JSON.stringify(r));
  assert.equal(r.error.code, "upstream_http_error");
  assert.equal(r.error.status, 404);
  assert.equal(r.error.retryable, false);
  assert.match(r.error.details?.type ?? "", /#NO_PATH_MATCHED_ERROR$/);
  const [x] = await store.since(mark, 1);
  assert.equal(x.method, "GET");
  assert.equal(x.path, "/v9/health");
  assert.equal(x.error, "NO_PATH_MATCHED_ERROR");
});

test("prism: Swagger 2.0 (ReadMe's petstore): multi arrays, path integers, api_key and oauth2 schemes, reserved characters", async () => {
  const mark = pets.mark();
  const r = await run(`
    const all = await tools.search({ namespace: "pets2", query: "", limit: 50 });
    const byStatus = await tools.pets2.pet.findPetsByStatus({ status: ["available", "sold"] });
    const inventory = await tools.pets2.store.getInventory({});
    const order = await tools.pets2.store.getOrderById({ orderId: 3 });
    const login = await tools.pets2.user.loginUser({ username: "ann", password: "p w&x=1/?" });
    return { paths: all.items.map((i) => i.path), byStatus, inventory, order, login };
  `);
  assert.equal(r.paths.length, 20);
  for (const p of ["pets2.pet.findPetsByStatus", "pets2.store.getInventory", "pets2.store.getOrderById", "pets2.store.placeOrder", "pets2.user.loginUser"])
    assert.ok(r.paths.includes(p), `${p} in ${r.paths}`);
  for (const k of ["byStatus", "inventory", "order", "login"]) {
    assert.equal(r[k].ok, true, `${k}: ${JSON.stringify(r[k])}`);
    assert.equal(r[k].http.status, 200);
  }
  assert.ok(Array.isArray(r.byStatus.data) && r.byStatus.data.length > 0, JSON.stringify(r.byStatus.data));
  assert.equal(r.byStatus.data[0].name, "doggie");
  assert.equal(typeof r.inventory.data, "object");
  assert.ok(["placed", "approved", "delivered"].includes(r.order.data.status), JSON.stringify(r.order.data));
  assert.equal(typeof r.login.data, "string");

  const [byStatus, inventory, order, login] = await pets.since(mark, 4);
  assertValid(byStatus, "GET", "/pet/findByStatus", { status: ["available", "sold"] });
  assert.equal(byStatus.headers.authorization, `Bearer ${SECRET}`, "the oauth2 scheme takes the secret as a bearer token");
  assertValid(inventory, "GET", "/store/inventory");
  assert.equal(inventory.headers.api_key, SECRET, "the api_key scheme's header");
  assertValid(order, "GET", "/store/order/3");
  // No `security` anywhere for this operation: the connection still goes,
  // in the API-key scheme that fits it (not the OAuth2 one listed first).
  assert.equal(order.headers.api_key, SECRET);
  assert.equal(order.headers.authorization, undefined);
  assertValid(login, "GET", "/user/login", { username: ["ann"], password: ["p w&x=1/?"] });
});

test("prism: public operations: `security: []` sends no credential; undeclared security needs no connection", async () => {
  const mark = store.mark();
  const health = await run("return await tools.store.health.getHealth({})");
  assert.equal(health.ok, true, JSON.stringify(health));
  const [x] = await store.since(mark, 1);
  assertValid(x, "GET", "/health");
  assert.equal(x.headers["x-api-key"], undefined, "a public operation gets no API key");
  assert.equal(x.headers.authorization, undefined);

  const petsMark = pets.mark();
  const r = await run(`
    const order = await tools.pets2anon.store.getOrderById({ orderId: 3 });
    const secured = await tools.pets2anon.store.getInventory({});
    return { order, secured };
  `);
  assert.equal(r.order.ok, true, JSON.stringify(r.order));
  assert.equal(r.secured.ok, false);
  assert.equal(r.secured.error.code, "connection_missing");
  const [order] = await pets.since(petsMark, 1);
  assertValid(order, "GET", "/store/order/3");
  assert.equal(order.headers.api_key, undefined);
  assert.equal(order.headers.authorization, undefined);
});

test("prism: Swagger 2.0: schema violations send nothing; an allowed POST sends the body parameter", async () => {
  const mark = pets.mark();
  const bad = await execute(`
    const order = await tools.pets2.store.getOrderById({ orderId: 11 });
    const pet = await tools.pets2.pet.addPet({ body: { name: "Rex" } });
    return { order, pet };
  `);
  assert.equal(bad.structuredContent?.status, "completed", JSON.stringify(bad));
  const { order, pet } = bad.structuredContent.result;
  assert.equal(order.ok, false);
  assert.equal(order.error.code, "invalid_tool_arguments");
  assert.match(order.error.message, /orderId/);
  assert.equal(pet.ok, false);
  assert.equal(pet.error.code, "invalid_tool_arguments");
  assert.match(pet.error.message, /photoUrls/);
  // The next request Prism sees is the sentinel.
  await run("return await tools.pets2.store.getInventory({})");
  const [sentinel] = await pets.since(mark, 1);
  assertValid(sentinel, "GET", "/store/inventory");

  // addPet's only documented answer is 405 "Invalid input": Prism validates
  // the body, then answers that, and the call surfaces it as an HTTP error.
  srv.cli(["policies", "add", "pets2.pet.addPet", "allow", "--data-dir", srv.dataDir]);
  const mark2 = pets.mark();
  const body = { name: "Rex", photoUrls: ["https://img.invalid/rex.png"], status: "available", tags: [{ id: 1, name: "good" }] };
  const added = await run(`return await tools.pets2.pet.addPet({ body: ${JSON.stringify(body)} })`);
  assert.equal(added.ok, false, JSON.stringify(added));
  assert.equal(added.error.code, "upstream_http_error");
  assert.equal(added.error.status, 405);
  assert.equal(added.error.retryable, false);
  const [x] = await pets.since(mark2, 1);
  assertValid(x, "POST", "/pet");
  assert.equal(x.status, 405);
  assert.equal(x.headers["content-type"], "application/json");
  assert.equal(x.headers.authorization, `Bearer ${SECRET}`);
  assert.deepEqual(JSON.parse(x.body), body);
});

test("prism: no tool result carries the secrets", () => {
  assert.ok(transcript.length > 10);
  for (const r of transcript) {
    assert.ok(!r.includes(SECRET), `a result carries the key: ${r.slice(0, 300)}`);
    assert.ok(!r.includes(BASIC_PASSWORD), `a result carries the password: ${r.slice(0, 300)}`);
  }
  assert.ok(!srv.logTail(1e7).includes(SECRET), "the server log carries the key");
});
