// Limits hold across nodes (SPEC §4, §10, §12; issue 41 §2): three
// `executor serve` processes on one store — one SQLite data dir in the e2e
// suite, one Postgres database in pg-e2e — give an org its share once, not
// once per node. Running executions of an org and of all, live sessions
// of an (account, org) and GET streams of a session are counted across
// the nodes: an org over its share on one node is over it on all.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, initSession, post, request, rpc, responseTo, openStream, mcpHeaders, drain, waitUntil, scrapeMetrics, sleep } from "./harness.mjs";

const HOLD_MS = 3000;
const LIMITS = [
  "--max-org-executions", "2",
  "--max-concurrent-executions", "3",
  "--max-sessions-per-principal", "2",
  "--max-get-streams-per-session", "2",
];

let a;
let b;
let c;

/** A node on `first`'s store, with its own flags. */
const nodeOf = (first, args) =>
  first.pg
    ? startServer({ store: "sqlite", env: first.pg.env, args: [...LIMITS, ...args] })
    : startServer({ dataDir: first.dataDir, args: [...LIMITS, ...args] });

before(async () => {
  a = await startServer({ args: LIMITS });
  // b refuses after a short wait in its org queue; c waits long enough.
  b = await nodeOf(a, ["--org-queue-wait", "1000"]);
  c = await nodeOf(a, ["--org-queue-wait", "20000"]);
});

after(async () => {
  await c?.cleanup();
  await b?.cleanup();
  // The first node owns the data dir (and the database): cleaned up last.
  await a?.cleanup();
});

/** A session of `bearer` on `node`, and a way to run code there. */
const sessionOn = async (node, bearer) => {
  const s = await initSession(node, bearer, "2025-11-25");
  let id = 10;
  const run = async (code) => {
    const n = id++;
    const res = await post(node, rpc("tools/call", { name: "execute", arguments: { code } }, n), {
      bearer,
      sessionId: s.sessionId,
      protocolVersion: s.protocolVersion,
      timeoutMs: 60_000,
    });
    return { status: res.status, body: res.body, result: responseTo(res, n)?.result };
  };
  return { ...s, run };
};

const HOLD = `await new Promise((r) => setTimeout(r, ${HOLD_MS})); return "held"`;
const running = async (node) => (await scrapeMetrics(node)).get("executor_executions_running") ?? 0;

test("an org at its share on one node is at it on every node; another org is not held", { timeout: 60_000 }, async () => {
  // Accounts of one org: the share is the org's; sessions are per account.
  const x = (n) => a.mint(`x${n}@cluster.test`, "org-x");
  const y = (n) => a.mint(`y${n}@cluster.test`, "org-y");
  const xa = await sessionOn(a, x(1));
  const xb = await sessionOn(b, x(2));
  const xc = await sessionOn(c, x(3));
  const yb = await sessionOn(b, y(1));
  const yc = await sessionOn(c, y(2));

  // Org x's share (2) runs on node a.
  const held = [xa.run(HOLD), xa.run(HOLD)];
  await waitUntil("node a runs org x's two executions", async () => (await running(a)) === 2, { ms: 10_000, every: 50 });

  // On b, x is over its share too: it waits its turn (1 s there), then is
  // refused with the queue's clear error.
  const refused = await xb.run("return 1");
  assert.equal(refused.status, 200, refused.body);
  assert.equal(refused.result?.isError, true, refused.body);
  assert.match(refused.result.content[0].text, /this organisation's 2 executions, its share of this server, stayed busy for the 1 s/);
  // On c, x waits for a turn and runs once a's executions end.
  const waited = xc.run("return 'after'");
  // Org y is under its share: it runs on b at once, while x waits.
  const other = await yb.run("return 'y'");
  assert.equal(other.result?.structuredContent?.result, "y", other.body);

  // All 3 running units of the cluster in use (x's 2 on a, y's 1 on b):
  // a new execution anywhere is refused at once as busy.
  const yHeld = yb.run(HOLD);
  await waitUntil("node b runs org y's execution", async () => (await running(b)) === 1, { ms: 10_000, every: 50 });
  const busy = await yc.run("return 1");
  const busyText = busy.status === 503 ? busy.body : JSON.stringify(busy.result);
  assert.match(busyText, /the server is running 3 executions, its limit|Service Unavailable/, busy.body);

  for (const r of await Promise.all(held)) assert.equal(r.result?.structuredContent?.result, "held", r.body);
  assert.equal((await yHeld).result?.structuredContent?.result, "held");
  const after = await waited;
  assert.equal(after.result?.structuredContent?.result, "after", after.body);
  const metrics = await scrapeMetrics(c);
  assert.ok((metrics.get("executor_execution_queue_waits_total") ?? 0) >= 1, "x's run on c waited in its org's queue");
});

test("live sessions of an (account, org) are counted across the nodes", { timeout: 30_000 }, async () => {
  const bearer = a.mint("sessions@cluster.test", "org-s");
  const first = await initSession(a, bearer, "2025-11-25");
  await initSession(b, bearer, "2025-11-25");
  // The principal's 2 live sessions are on a and b: c refuses a third.
  const refused = await post(c, rpc("initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } }, 1), { bearer });
  assert.equal(refused.status, 429, refused.body);
  assert.match(refused.body, /2/);
  // Another principal is not held.
  await initSession(c, a.mint("other@cluster.test", "org-s"), "2025-11-25");
  // One goes: its unit comes back to the cluster, and c may create one.
  const del = await request(a.mcpUrl, { method: "DELETE", headers: mcpHeaders({ bearer, sessionId: first.sessionId, protocolVersion: first.protocolVersion }) });
  assert.ok([200, 202, 204].includes(del.status), `DELETE answered ${del.status}`);
  let created;
  await waitUntil("c creates a session once a's is gone", async () => {
    created = await post(c, rpc("initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } }, 1), { bearer });
    return created.status === 200;
  }, { ms: 10_000, every: 250 });
  assert.ok(created.headers["mcp-session-id"]);
});

test("GET streams of one session are counted across the nodes", { timeout: 30_000 }, async () => {
  const bearer = a.mint("streams@cluster.test", "org-g");
  const s = await initSession(a, bearer, "2025-11-25");
  const get = (node) =>
    openStream(node.mcpUrl, { headers: { ...mcpHeaders({ bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion }), accept: "text/event-stream" } });
  // One on the holder (a), one on b, fed from the log.
  const onA = await get(a);
  const onB = await get(b);
  try {
    assert.equal(onA.status, 200);
    assert.equal(onB.status, 200);
    // The session's 2 streams are open: c refuses a third.
    const third = await get(c);
    await drain(third);
    assert.equal(third.status, 429, third.text);
    assert.match(third.text, /limit 2/);
    // One closes: c may open one once b gave its unit back.
    onB.close();
    let again;
    await waitUntil("c opens a stream once b's closed", async () => {
      again = await get(c);
      if (again.status === 200) return true;
      await drain(again);
      return false;
    }, { ms: 10_000, every: 250 });
    again.close();
  } finally {
    onA.close();
    onB.close();
  }
});

test("a node's units come back when its lease lapses", { timeout: 60_000 }, async () => {
  // A fourth node takes org z's whole share, then stops for good (kill -9):
  // once its lease lapsed, the share is the others' again.
  const d = await nodeOf(a, ["--node-lease-ms", "2000"]);
  const z = a.mint("z@cluster.test", "org-z");
  const zd = await sessionOn(d, z);
  const held = [zd.run(HOLD), zd.run(HOLD)];
  await waitUntil("node d runs org z's two executions", async () => (await running(d)) === 2, { ms: 10_000, every: 50 });
  d.child.kill("SIGKILL");
  await Promise.allSettled(held);
  const zc = await sessionOn(c, z);
  const r = await zc.run("return 'z'");
  assert.equal(r.result?.structuredContent?.result, "z", r.body);
  await d.cleanup();
  await sleep(0);
});
