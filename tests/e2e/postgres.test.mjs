// The Postgres store from the outside (SPEC §10, issue 12), run by the
// pg-e2e suite (EXECUTOR_TEST_STORE=postgres): the binary's start rules on a
// shared store, and `executor migrate` taking a live embedded store —
// tokens, a session, a sealed connection and a paused approval — to
// Postgres, where a new node with no files of the old one serves them all.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { BIN, STORE, startServer, connectSdk, recordingUpstream, pgStore, freePort, post, rpc } from "./harness.mjs";

const skip = STORE !== "postgres" && "runs in the pg-e2e suite (EXECUTOR_TEST_STORE=postgres)";

/** The binary once, to its exit. */
const exec = (args, env) =>
  spawnSync(BIN, args, { encoding: "utf8", env: { ...process.env, RUST_LOG: "warn", ...env }, timeout: 30_000 });

/** `serve` that must refuse to start: its exit and stderr. */
const refusedServe = (env) => exec(["serve", "--listen", "127.0.0.1:0", "--data-dir", mkdtempSync(join(tmpdir(), "executor-e2e-pg-"))], env);

test("a node of a shared store starts only with an explicit key, and only with the store's key", { skip }, async () => {
  const db = pgStore();
  try {
    // A password in the URL (trust auth ignores it) must never be printed.
    const url = db.url.replace("postgres@", "postgres:hunter2-secret@");
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== "EXECUTOR_SECRET_KEY"));
    const keyless = spawnSync(BIN, ["serve", "--listen", "127.0.0.1:0", "--data-dir", mkdtempSync(join(tmpdir(), "executor-e2e-pg-"))], {
      encoding: "utf8",
      env: { ...env, EXECUTOR_DATABASE_URL: url },
      timeout: 30_000,
    });
    assert.notEqual(keyless.status, 0);
    assert.match(keyless.stderr, /needs the same secret key on every node/);
    assert.ok(!keyless.stderr.includes("hunter2"), keyless.stderr);

    // The first node's key is the store's; a second node with another is refused.
    const key = randomBytes(32).toString("hex");
    const first = await startServer({ env: { EXECUTOR_DATABASE_URL: url, EXECUTOR_SECRET_KEY: key }, store: "sqlite" });
    await first.stop();
    const other = refusedServe({ EXECUTOR_DATABASE_URL: url, EXECUTOR_SECRET_KEY: randomBytes(32).toString("hex") });
    assert.notEqual(other.status, 0);
    assert.match(other.stderr, /not the key the store .* was set up with/);
    assert.ok(other.stderr.includes("postgres:***@"), other.stderr);
    assert.ok(!other.stderr.includes("hunter2"), other.stderr);
    await first.cleanup();

    // A database of another program is left alone.
    const foreign = pgStore();
    foreign.sql("CREATE TABLE invoices (id int)");
    const refused = refusedServe({ EXECUTOR_DATABASE_URL: foreign.url, EXECUTOR_SECRET_KEY: key });
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /another program \(invoices\)/);
    foreign.drop();
  } finally {
    db.drop();
  }
});

const SECRET = "pg-migrate-SECRET-0123456789";
const spec = {
  openapi: "3.0.3",
  info: { title: "ledger", version: "1" },
  components: { securitySchemes: { main: { type: "http", scheme: "bearer" } } },
  security: [{ main: [] }],
  paths: {
    "/entries": {
      post: {
        operationId: "addEntry",
        tags: ["entries"],
        requestBody: { required: true, content: { "application/json": { schema: { type: "object", properties: { amount: { type: "integer" } } } } } },
        responses: { 200: { description: "ok" } },
      },
    },
  },
};

let upstream;
before(async () => {
  upstream = await recordingUpstream((_, res) => res.end(JSON.stringify({ booked: true })));
});
after(() => upstream?.close());

test("executor migrate: a live embedded store moves to Postgres, and a new node serves it", { skip }, async () => {
  // The embedded store, used as a team would: a token, an integration with
  // a sealed credential, a policy, a session and a paused approval.
  const old = await startServer({ store: "sqlite", args: ["--allow-local-network"] });
  try {
    await movesToPostgres(old);
  } finally {
    await old.cleanup();
  }
});

const movesToPostgres = async (old) => {
  const bearer = old.mint("mover@example.com");
  const specFile = join(old.dataDir, "ledger.json");
  writeFileSync(specFile, JSON.stringify(spec));
  old.cli(["integrations", "add", "openapi", "--spec", specFile, "--namespace", "ledger", "--base-url", upstream.base, "--org", "mover@example.com", "--data-dir", old.dataDir]);
  spawnSync(BIN, ["connections", "set", "ledger", "--bearer", "-", "--org", "mover@example.com", "--data-dir", old.dataDir], {
    input: SECRET + "\n",
    env: old.env,
  });
  old.cli(["policies", "add", "ledger.*", "require_approval", "--org", "mover@example.com", "--data-dir", old.dataDir]);
  const { client } = await connectSdk(old, bearer);
  const paused = await client.callTool({ name: "execute", arguments: { code: "return (await tools.ledger.entries.addEntry({ body: { amount: 7 } })).data;" } });
  const executionId = paused.structuredContent.executionId;
  assert.match(executionId ?? "", /^exec_/, JSON.stringify(paused));
  const sessionId = client.transport.sessionId;
  await client.close().catch(() => {});
  await old.stop();
  assert.equal(upstream.seen.length, 0, "nothing was sent before the approval");

  // The copy, with the key the embedded store sealed with.
  const db = pgStore();
  try {
    const key = readFileSync(join(old.dataDir, "secret.key"), "utf8").trim();
    const keyFromFile = spawnSync(BIN, ["migrate", "--data-dir", old.dataDir], {
      encoding: "utf8",
      env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== "EXECUTOR_SECRET_KEY")), EXECUTOR_DATABASE_URL: db.url },
    });
    assert.equal(keyFromFile.status, 0, keyFromFile.stderr);
    assert.match(keyFromFile.stderr, /copied .* 1 connections/);
    assert.match(keyFromFile.stderr, /EXECUTOR_SECRET_KEY=\$\(cat /);
    // A second copy into the now-used database is refused, whole.
    const again = spawnSync(BIN, ["migrate", "--data-dir", old.dataDir], { encoding: "utf8", env: { ...process.env, EXECUTOR_DATABASE_URL: db.url, EXECUTOR_SECRET_KEY: key } });
    assert.notEqual(again.status, 0);
    assert.match(again.stderr, /already holds data/);

    // A node with a new, empty data dir: everything it needs is in the database.
    const port = await freePort();
    const node = await startServer({ store: "sqlite", port, env: { EXECUTOR_DATABASE_URL: db.url, EXECUTOR_SECRET_KEY: key }, args: ["--allow-local-network"] });
    try {
      // The old session is restored here, with the old token.
      const listed = await post(node, rpc("tools/list", {}, 2), { bearer, sessionId });
      assert.equal(listed.status, 200, listed.body);
      // The agent decides the approval on the new node: the call goes out
      // once, with the credential sealed on the old machine.
      const { client: agent } = await connectSdk(node, bearer);
      const resumed = await agent.callTool({ name: "resume", arguments: { executionId, action: "accept" } });
      assert.deepEqual(resumed.structuredContent.result, { booked: true }, JSON.stringify(resumed));
      const again = await agent.callTool({ name: "resume", arguments: { executionId, action: "accept" } });
      assert.deepEqual(again.structuredContent.result, { booked: true }, "idempotent");
      await agent.close().catch(() => {});
      assert.equal(upstream.seen.length, 1, "sent once");
      assert.equal(upstream.seen[0].headers.authorization, `Bearer ${SECRET}`);
      const history = node.cli(["executions", "list"]);
      assert.ok(history.includes(executionId), history);
    } finally {
      await node.cleanup();
    }
  } finally {
    db.drop();
  }
};
