// Any node serves any session (SPEC §10, issue 12): two `executor serve`
// processes on one store — one SQLite data dir in the e2e suite, one
// Postgres database in pg-e2e. A session lives on the node holding its
// lease; a request that lands on the other node is handed to the holder,
// a GET there is fed from the log, and a dead holder's sessions are taken
// over by the node the next request reaches.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
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
} from "./harness.mjs";

/** A second node on the first one's store. */
const peerOf = (first) =>
  first.pg
    ? startServer({ store: "sqlite", env: first.pg.env, args: ["--node-lease-ms", "2000"] })
    : startServer({ dataDir: first.dataDir, args: ["--node-lease-ms", "2000"] });

const counter = async (srv, re) => metricMatching(await scrapeMetrics(srv), re);
const FORWARDED = /^executor_forwarded(_total)?$/;
const CLAIMS = /^executor_session_claims(_total)?$/;

let a;
let b;
let bearer;

before(async () => {
  a = await startServer({ args: ["--node-lease-ms", "2000"] });
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
    const ev = await g.waitFor((evs) => evs.find((e) => e.message?.id === 9), 10_000);
    assert.equal(ev.message.result.content[0].text, "from-the-holder");
  } finally {
    g.close();
  }
});

test("DELETE on the other node terminates the session everywhere", async () => {
  const s = await initSession(a, bearer);
  const headers = mcpHeaders({ bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  const del = await openStream(b.mcpUrl, { method: "DELETE", headers });
  assert.equal(del.status, 200, await drain(del));
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
