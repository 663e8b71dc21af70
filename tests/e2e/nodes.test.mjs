// Any node serves any session (SPEC §10, issue 12): two `executor serve`
// processes on one store — one SQLite data dir in the e2e suite, one
// Postgres database in pg-e2e. A session lives on the node holding its
// lease; a request that lands on the other node is handed to the holder,
// a GET there is fed from the log, and a dead holder's sessions are taken
// over by the node the next request reaches.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  startServer,
  initSession,
  post,
  rpc,
  openStream,
  openGet,
  mcpHeaders,
  drain,
  responseTo,
  scrapeMetrics,
  metricMatching,
  waitUntil,
  noStickyFailure,
  EXECUTE_ONE,
  STORE,
  connectSdk,
  recordingUpstream,
} from "./harness.mjs";

/** A second node on the first one's store. */
const ARGS = ["--node-lease-ms", "2000", "--allow-local-network"];
const peerOf = (first) =>
  first.pg ? startServer({ store: "sqlite", env: first.pg.env, args: ARGS }) : startServer({ dataDir: first.dataDir, args: ARGS });

const counter = async (srv, re) => metricMatching(await scrapeMetrics(srv), re);
const FORWARDED = /^executor_forwarded(_total)?$/;
const CLAIMS = /^executor_session_claims(_total)?$/;

let a;
let b;
let bearer;

before(async () => {
  a = await startServer({ args: ARGS });
  b = await peerOf(a);
  bearer = a.mint("nodes@example.com");
});

after(async () => {
  await b?.cleanup();
  // The first node owns the data dir (and the database): cleaned up last.
  await a?.cleanup();
});

test("a request on the other node is served by the session's holder, the client sees no difference", async () => {
  const s = await initSession(a, bearer);
  const before = await counter(b, FORWARDED);
  const list = await post(b, rpc("tools/list", {}, 2), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  assert.equal(list.status, 200, list.body);
  assert.equal(list.headers["mcp-session-id"], s.sessionId);
  assert.ok(responseTo(list, 2)?.result?.tools?.some((t) => t.name === "execute"), list.body);
  const call = await post(b, rpc("tools/call", EXECUTE_ONE, 3), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  assert.equal(call.status, 200, call.body);
  assert.ok(noStickyFailure(call), call.body);
  assert.equal(responseTo(call, 3)?.result?.content?.[0]?.text, "1", call.body);
  assert.ok((await counter(b, FORWARDED)) >= before + 2, "both requests were handed to the holder");
  assert.equal(await counter(a, FORWARDED), 0, "the holder served them itself");

  // Someone else's session is refused where the request lands: nothing is handed over.
  const other = a.mint("stranger@example.com");
  const forwarded = await counter(b, FORWARDED);
  const refused = await post(b, rpc("tools/list", {}, 4), { bearer: other, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  assert.equal(refused.status, 403, refused.body);
  assert.equal(await counter(b, FORWARDED), forwarded);
});

test("a GET on the other node receives what the holder logs for it", async () => {
  const s = await initSession(a, bearer);
  const headers = { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion };
  const g = await openGet(b, headers);
  try {
    assert.equal(g.status, 200, await (g.status === 200 ? "" : drain(g)));
    // A call on the holder whose POST stream dies before its answer: the
    // answer is logged undelivered, and the GET on the other node takes it.
    const st = await openStream(a.mcpUrl, {
      method: "POST",
      headers: mcpHeaders(headers),
      body: rpc("tools/call", { name: "execute", arguments: { code: "await new Promise((r) => setTimeout(r, 700)); return 'from-the-holder';" } }, 9),
    });
    assert.equal(st.status, 200);
    await st.waitFor((evs) => evs.find((e) => e.id), 5000);
    st.close();
    // On Postgres the holder's notice brings it: the fallback poll for a
    // lost notice runs every 10 s, so a wait shorter than that proves the
    // notice. SQLite has no notices; there the poll (each second) brings it.
    const within = STORE === "postgres" ? 4000 : 10_000;
    const ev = await g.waitFor((evs) => evs.find((e) => e.message?.id === 9), within);
    assert.equal(ev.message.result.content[0].text, "from-the-holder");
  } finally {
    g.close();
  }
});

test("DELETE on the other node terminates the session everywhere", async () => {
  const s = await initSession(a, bearer);
  const headers = mcpHeaders({ bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  // A GET stream on the node that does not hold the session ends too.
  const g = await openGet(b, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  assert.equal(g.status, 200);
  await g.waitFor((evs) => evs.length > 0, 5000);
  const del = await openStream(b.mcpUrl, { method: "DELETE", headers });
  assert.equal(del.status, 200, await drain(del));
  await drain(g, 15_000);
  assert.ok(g.ended, "the GET stream on the other node ended with the session");
  const after = await post(a, rpc("tools/list", {}, 5), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  assert.equal(after.status, 404, after.body);
});

test("kill -9 of the holder: the next request on the other node takes the session over", async () => {
  const s = await initSession(a, bearer);
  const claims = await counter(b, CLAIMS);
  await a.kill9();
  try {
    for (let i = 0; i < 3; i++) {
      const res = await post(b, rpc("tools/call", EXECUTE_ONE, 20 + i), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
      assert.equal(res.status, 200, res.body);
      assert.ok(noStickyFailure(res), res.body);
    }
    assert.equal(await counter(b, CLAIMS), claims + 1, "taken over once");
  } finally {
    await a.restart();
  }
  // The restarted node (a new node on the same address) finds the session
  // on its new holder and hands requests to it.
  await waitUntil("the restarted node to serve the session", async () => {
    const res = await post(a, rpc("tools/list", {}, 30), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
    return res.status === 200;
  });
});

test(
  "a catalog change made through the CLI reaches a GET on the other node as tools/list_changed",
  { skip: STORE !== "postgres" && "Postgres pushes it between nodes (pg-e2e); on SQLite only the holder's own streams hear it" },
  async () => {
    const s = await initSession(a, bearer);
    // The holder builds the tool list once, so that it has one to compare.
    const list = await post(a, rpc("tools/list", {}, 40), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
    assert.equal(list.status, 200, list.body);
    const g = await openGet(b, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
    try {
      assert.equal(g.status, 200, await (g.status === 200 ? "" : drain(g)));
      await g.waitFor((evs) => evs.length > 0, 5000); // primed: the stream is registered
      const spec = fileURLToPath(new URL("./fixtures/petstore.yaml", import.meta.url));
      b.cli(["integrations", "add", "openapi", "--spec", spec, "--namespace", "nodepets", "--org", "nodes@example.com", "--data-dir", b.dataDir]);
      const ev = await g.waitFor((evs) => evs.find((e) => e.message?.method === "notifications/tools/list_changed"), 8000);
      assert.ok(ev, "the GET on the other node heard of the change");
      b.cli(["integrations", "remove", "nodepets", "--org", "nodes@example.com", "--data-dir", b.dataDir]);
    } finally {
      g.close();
    }
  },
);

const ledger = {
  openapi: "3.0.3",
  info: { title: "ledger", version: "1" },
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

test("a paused approval is resumed from any node, and after its holder is killed, sent exactly once", async () => {
  const upstream = await recordingUpstream((_, res) => res.end(JSON.stringify({ booked: true })));
  const org = ["--org", "nodes@example.com", "--data-dir", a.dataDir];
  try {
    const specFile = join(a.dataDir, "ledger.json");
    writeFileSync(specFile, JSON.stringify(ledger));
    a.cli(["integrations", "add", "openapi", "--spec", specFile, "--namespace", "ledger", "--base-url", upstream.base, ...org]);
    a.cli(["policies", "add", "ledger.*", "require_approval", ...org]);
    const pause = async (amount) => {
      const { client } = await connectSdk(a, bearer);
      const paused = await client.callTool({ name: "execute", arguments: { code: `return (await tools.ledger.entries.addEntry({ body: { amount: ${amount} } })).data;` } });
      await client.close().catch(() => {});
      const id = paused.structuredContent?.executionId;
      assert.match(id ?? "", /^exec_/, JSON.stringify(paused));
      return id;
    };
    const resumeOnB = async (executionId) => {
      const { client } = await connectSdk(b, bearer);
      try {
        return await client.callTool({ name: "resume", arguments: { executionId, action: "accept" } }, undefined, { timeout: 60_000 });
      } finally {
        await client.close().catch(() => {});
      }
    };

    // The holder is alive: the decision goes to it, and it runs the call.
    const first = await pause(1);
    const done = await resumeOnB(first);
    assert.deepEqual(done.structuredContent?.result, { booked: true }, JSON.stringify(done));
    assert.equal(upstream.seen.length, 1, "sent once, by the holder");

    // The holder is killed while the run waits: the other node takes the
    // run over once the holder's lease lapses, and sends the call once.
    const second = await pause(2);
    await a.kill9();
    const resumed = await resumeOnB(second);
    assert.deepEqual(resumed.structuredContent?.result, { booked: true }, JSON.stringify(resumed));
    const again = await resumeOnB(second);
    assert.deepEqual(again.structuredContent, resumed.structuredContent, "a repeat answers the same, sending nothing");
    assert.equal(upstream.seen.length, 2, "each approved call reached the upstream exactly once");
    assert.deepEqual(JSON.parse(upstream.seen[1].body), { amount: 2 });
  } finally {
    if (a.child.exitCode !== null || a.child.signalCode !== null) await a.restart();
    upstream.close();
  }
});

test("a node stopped past its lease cannot act as the holder once it wakes (fencing)", async () => {
  const s = await initSession(a, bearer);
  const headers = { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion };
  // A call in flight on the holder when it is stopped.
  const st = await openStream(a.mcpUrl, {
    method: "POST",
    headers: mcpHeaders(headers),
    body: rpc("tools/call", { name: "execute", arguments: { code: "await new Promise((r) => setTimeout(r, 1500)); return 'stale';" } }, 50),
  });
  assert.equal(st.status, 200);
  await st.waitFor((evs) => evs.find((e) => e.id), 5000);
  const claims = await counter(b, CLAIMS);
  a.child.kill("SIGSTOP");
  try {
    // Past its lease (2 s), the session is the other node's to claim.
    await new Promise((r) => setTimeout(r, 3000));
    const list = await post(b, rpc("tools/list", {}, 51), headers);
    assert.equal(list.status, 200, list.body);
    assert.equal(await counter(b, CLAIMS), claims + 1, "taken over");
  } finally {
    a.child.kill("SIGCONT");
  }
  // Awake, the old holder finishes its call, but cannot log its answer as
  // the session's holder: the write is fenced, and nothing reaches the log.
  await waitUntil("the stale holder's write to be fenced", async () => (await counter(a, /^executor_fenced_writes(_total)?$/)) >= 1, { ms: 15_000, every: 200 });
  st.close();
  const g = await openGet(b, headers);
  try {
    assert.equal(g.status, 200);
    await new Promise((r) => setTimeout(r, 1000));
    assert.ok(!g.events.some((e) => e.message?.id === 50), "the stale answer never reached the log");
  } finally {
    g.close();
  }
  // The session works on either node.
  for (const srv of [a, b]) {
    const res = await post(srv, rpc("tools/call", EXECUTE_ONE, 52), headers);
    assert.equal(res.status, 200, res.body);
    assert.equal(responseTo(res, 52)?.result?.content?.[0]?.text, "1", res.body);
  }
});

/** A read-only upstream: its calls need no approval. */
const tally = {
  openapi: "3.0.3",
  info: { title: "tally", version: "1" },
  paths: {
    "/count": {
      get: {
        operationId: "count",
        tags: ["counts"],
        parameters: [{ name: "i", in: "query", schema: { type: "integer" } }],
        responses: { 200: { description: "ok" } },
      },
    },
  },
};

test("a holder stopped past its lease sends no further call of a running execution once it wakes (issue 41 §3)", async () => {
  const upstream = await recordingUpstream((_, res) => res.end(JSON.stringify({ ok: true })));
  const org = ["--org", "nodes@example.com", "--data-dir", a.dataDir];
  try {
    const specFile = join(a.dataDir, "tally.json");
    writeFileSync(specFile, JSON.stringify(tally));
    a.cli(["integrations", "add", "openapi", "--spec", specFile, "--namespace", "tally", "--base-url", upstream.base, ...org]);
    const s = await initSession(a, bearer);
    const headers = { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion };
    // A run that calls the upstream every 150 ms for about 6 s.
    const code =
      "for (let i = 0; i < 40; i++) { await tools.tally.counts.count({ i }); await new Promise((r) => setTimeout(r, 150)); } return 'finished';";
    const st = await openStream(a.mcpUrl, {
      method: "POST",
      headers: mcpHeaders(headers),
      body: rpc("tools/call", { name: "execute", arguments: { code } }, 60),
    });
    assert.equal(st.status, 200);
    await waitUntil("the run's first calls", async () => upstream.seen.length >= 2, { ms: 10_000, every: 20 });
    a.child.kill("SIGSTOP");
    let sentBeforeTheStop;
    try {
      // A request already on the wire lands meanwhile; nothing after it.
      await new Promise((r) => setTimeout(r, 500));
      sentBeforeTheStop = upstream.seen.length;
      // Past its lease (2 s), the session is the other node's.
      await new Promise((r) => setTimeout(r, 2500));
      const list = await post(b, rpc("tools/list", {}, 61), headers);
      assert.equal(list.status, 200, list.body);
    } finally {
      a.child.kill("SIGCONT");
    }
    // Awake, the old holder's run would go on calling for about 5 s; it
    // finds its lease gone before its next call and stops.
    await new Promise((r) => setTimeout(r, 4000));
    assert.equal(
      upstream.seen.length,
      sentBeforeTheStop,
      `a stale holder sent ${upstream.seen.length - sentBeforeTheStop} call(s) after it lost the session's lease`,
    );
    st.close();
    // The session goes on, on either node.
    for (const srv of [a, b]) {
      const res = await post(srv, rpc("tools/call", EXECUTE_ONE, 62), headers);
      assert.equal(res.status, 200, res.body);
      assert.equal(responseTo(res, 62)?.result?.content?.[0]?.text, "1", res.body);
    }
  } finally {
    a.cli(["integrations", "remove", "tally", ...org]);
    upstream.close();
  }
});
