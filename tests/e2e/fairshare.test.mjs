// SPEC §4 fair share, end to end: org A saturating its share — with busy
// loops, slow tool calls, or executions paused for approval — never holds
// org B's `execute`; A's run over its share waits its turn in A's queue
// (and past the queue's bounds is refused with a clear error); paused
// executions hold no slot; over the server's limit a new `execute` gets
// 503 with Retry-After.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServer, connectSdk, recordingUpstream, initSession, post, rpc, sleep, scrapeMetrics, openStream, mcpHeaders, waitUntil, request, PAST_IDLE_MS } from "./harness.mjs";

const HOLD_MS = 2500;
const spec = {
  openapi: "3.0.3",
  info: { title: "slow", version: "1" },
  paths: {
    "/slow": { get: { operationId: "wait", tags: ["slow"], responses: { 200: { description: "ok" } } } },
    "/orders": { post: { operationId: "create", tags: ["orders"], responses: { 200: { description: "ok" } } } },
    "/mark": { get: { operationId: "mark", tags: ["mark"], responses: { 200: { description: "ok" } } } },
  },
};

let upstream;
let srv;
let a;
let b;

const setup = async (args) => {
  const server = await startServer({ args: ["--allow-local-network", ...args] });
  const tokenA = server.mint("a@fair.test", "org-a");
  const tokenB = server.mint("b@fair.test", "org-b");
  const file = join(server.dataDir, "slow.json");
  writeFileSync(file, JSON.stringify(spec));
  for (const org of ["org-a", "org-b"]) {
    server.cli(["integrations", "add", "openapi", "--spec", file, "--namespace", "slow", "--base-url", upstream.base, "--org", org, "--data-dir", server.dataDir]);
  }
  return { server, tokenA, tokenB };
};

before(async () => {
  upstream = await recordingUpstream((req, res) => {
    if (req.url.startsWith("/slow")) return setTimeout(() => res.end(JSON.stringify({ slow: true })), HOLD_MS);
    res.end(JSON.stringify({ created: true }));
  });
  let tokenA, tokenB;
  ({ server: srv, tokenA, tokenB } = await setup(["--max-org-executions", "2", "--max-concurrent-executions", "8"]));
  a = (await connectSdk(srv, tokenA)).client;
  b = (await connectSdk(srv, tokenB)).client;
});
after(async () => {
  await a?.close().catch(() => {});
  await b?.close().catch(() => {});
  await srv?.cleanup();
  upstream?.close();
});

/** Waits until `server` runs `n` executions (its /metrics gauge). */
const untilRunning = async (server, n) => {
  for (let i = 0; i < 200; i++) {
    if ((await scrapeMetrics(server)).get("executor_executions_running") === n) return;
    await sleep(20);
  }
  throw new Error(`the server never ran ${n} executions`);
};

const execute = (client, code) => client.callTool({ name: "execute", arguments: { code } }, undefined, { timeout: 60_000 });
const BUSY = `const t = Date.now(); while (Date.now() - t < ${HOLD_MS}) {} return 'a'`;
const SLOW = "return (await tools.slow.slow.wait({})).data.slow";

for (const [how, code] of [["busy loops", BUSY], ["slow tool calls", SLOW]]) {
  test(`fair share: A's ${how} fill its share; A's next run waits its turn, B's answers`, async () => {
    let settled = 0;
    const held = [execute(a, code), execute(a, code)].map((p) => p.finally(() => settled++));
    await untilRunning(srv, 2); // both have started: the share is full
    let queuedDone = false;
    const queued = execute(a, "return 1").finally(() => (queuedDone = true));
    const answered = await execute(b, "return 'b'");
    assert.equal(answered.structuredContent.result, "b");
    assert.equal(settled, 0, "B answered while A's runs were still going");
    assert.equal(queuedDone, false, "A's third run still waits for a turn");
    for (const r of await Promise.all(held)) assert.equal(r.isError, undefined, JSON.stringify(r));
    const served = await queued;
    assert.equal(served.structuredContent?.result, 1, JSON.stringify(served));
  });
}

test("fair share: a queued run whose client goes away leaves the queue at once and never runs", async () => {
  const tokenA = srv.mint("a@fair.test", "org-a");
  const held = [execute(a, BUSY), execute(a, BUSY)];
  await untilRunning(srv, 2);
  const { sessionId, protocolVersion } = await initSession(srv, tokenA, "2025-11-25");
  const clientGone = async () => Number(/executor_execution_queue_refusals_total\{reason="client_gone"\} (\d+)/.exec((await request(`${srv.base}/metrics`, { method: "GET" })).body)[1]);
  const before = await clientGone();
  const marks = () => upstream.seen.filter((r) => r.url.startsWith("/mark")).length;
  const marked = marks();
  // An SSE POST: its work would outlive the client once it runs.
  const queued = await openStream(srv.mcpUrl, {
    method: "POST",
    headers: mcpHeaders({ bearer: tokenA, sessionId, protocolVersion }),
    body: rpc("tools/call", { name: "execute", arguments: { code: "await tools.slow.mark.mark({}); return 'ran'" } }),
  });
  await waitUntil("the run waits in org A's queue", async () => (await scrapeMetrics(srv)).get("executor_executions_queued") === 1);
  queued.close();
  // It leaves at once, long before A's runs give a slot up.
  await waitUntil("the queue is empty", async () => (await scrapeMetrics(srv)).get("executor_executions_queued") === 0, { ms: HOLD_MS / 2 });
  assert.equal(await clientGone(), before + 1, "counted as a client gone");
  await Promise.all(held);
  await sleep(300);
  assert.equal(marks(), marked, "the queued run never ran");
});

test("fair share: paused executions hold no slot", async () => {
  const paused = [];
  for (let i = 0; i < 2; i++) {
    const r = await execute(a, "return (await tools.slow.orders.create({})).data");
    assert.equal(r.structuredContent.status, "waiting_for_interaction");
    paused.push(r.structuredContent.executionId);
  }
  // Two of A's runs wait for a human; A still runs two at once, and B runs.
  const both = await Promise.all([execute(a, "return 1"), execute(a, "return 2"), execute(b, "return 3")]);
  assert.deepEqual(both.map((r) => r.structuredContent.result), [1, 2, 3]);
  // A third approval of A's cannot wait: the paused bound is its share.
  const third = await execute(a, "try { await tools.slow.orders.create({}) } catch (e) { return e.message }");
  assert.match(third.structuredContent.result, /waiting for approval/);
  for (const id of paused) {
    const r = await a.callTool({ name: "resume", arguments: { executionId: id, action: "accept" } });
    assert.deepEqual(r.structuredContent.result, { created: true });
  }
});

test("fair share: over the server's limit a new execute gets 503 with Retry-After", async () => {
  const { server, tokenA, tokenB } = await setup(["--max-org-executions", "2", "--max-concurrent-executions", "2"]);
  try {
    const clientA = (await connectSdk(server, tokenA)).client;
    const held = [execute(clientA, BUSY), execute(clientA, BUSY)];
    await untilRunning(server, 2);
    const { sessionId, protocolVersion } = await initSession(server, tokenB, "2025-11-25");
    const res = await post(server, rpc("tools/call", { name: "execute", arguments: { code: "return 1" } }), { bearer: tokenB, sessionId, protocolVersion });
    assert.equal(res.status, 503, res.body);
    assert.equal(res.headers["retry-after"], "1");
    // Other requests of the same session still answer.
    const list = await post(server, rpc("tools/list", {}), { bearer: tokenB, sessionId, protocolVersion });
    assert.equal(list.status, 200);
    await Promise.all(held);
    const later = await post(server, rpc("tools/call", { name: "execute", arguments: { code: "return 1" } }), { bearer: tokenB, sessionId, protocolVersion });
    assert.equal(later.status, 200);
    await clientA.close();
  } finally {
    await server.cleanup();
  }
});

// Issue 41: 300 agents of one org at once, each calling execute 10 times
// across an idle disposal, with the default limits (16 running per org):
// every call is served, the ones over the share after a turn in the queue.
test("fair share: a burst of 300 agents of one org, 10 calls each across an idle disposal, is served 3,000 of 3,000", { timeout: 300_000 }, async () => {
  const AGENTS = 300;
  const CALLS = 10;
  const server = await startServer();
  try {
    const token = server.mint("burst@fair.test", "org-burst");
    const clients = [];
    for (let i = 0; i < AGENTS; i += 30) {
      clients.push(...(await Promise.all(Array.from({ length: 30 }, () => connectSdk(server, token)))).map((c) => c.client));
    }
    let correct = 0;
    const wrong = [];
    // A few milliseconds of work each, so that the burst is over the share.
    const call = async (client, n) => {
      const code = `const t = Date.now(); while (Date.now() - t < 5) {} return ${n}`;
      const r = await execute(client, code).catch((e) => ({ thrown: String(e) }));
      if (r.structuredContent?.result === n) correct++;
      else wrong.push(JSON.stringify(r).slice(0, 400));
    };
    const round = (k) => Promise.all(clients.map((client, i) => call(client, i * CALLS + k)));
    for (let k = 0; k < CALLS / 2; k++) await round(k);
    await sleep(PAST_IDLE_MS); // every session's runtime is disposed
    for (let k = CALLS / 2; k < CALLS; k++) await round(k);
    assert.equal(correct, AGENTS * CALLS, `${wrong.length} wrong, e.g.:\n${wrong.slice(0, 3).join("\n")}`);
    const metrics = await scrapeMetrics(server);
    assert.ok(metrics.get("executor_execution_queue_waits_total") > 0, "the burst went over the share and waited its turn");
    assert.equal(metrics.get("executor_execution_queue_refusals_total"), 0, "nobody was refused");
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
  } finally {
    await server.cleanup();
  }
});
