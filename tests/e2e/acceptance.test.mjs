// SPEC §3 "The regression this design exists to prevent": after the runtime of
// a session is disposed for idleness, a GET listen stream and a POST fired at
// the same instant must both answer 200, and so must every later request.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  startServer, connectSdk, connectSocket, openGet, drain, post, rpc, responseTo, noStickyFailure,
  sleep, PAST_IDLE_MS, EXECUTE_ONE, scrapeMetrics, metricMatching, DISPOSED_RE, RESTORED_RE,
} from "./harness.mjs";

const SESSIONS = 5;
const ROUNDS = 3;

let srv;
let bearer;
before(async () => {
  srv = await startServer();
  bearer = srv.mint("acceptance@example.com");
});
after(async () => {
  await srv?.cleanup();
});

const checkToolsList = (res, id, label) => {
  assert.equal(res.status, 200, `${label}: status ${res.status}, body ${res.body}`);
  assert.ok(noStickyFailure(res), `${label}: sticky failure signature in ${res.body}`);
  const msg = responseTo(res, id);
  assert.ok(msg, `${label}: no response to id ${id} in ${res.body}`);
  assert.equal(msg.error, undefined, `${label}: error ${JSON.stringify(msg.error)}`);
  assert.ok(msg.result.tools.some((t) => t.name === "execute"), `${label}: execute missing from ${res.body}`);
};

/** Fire GET + POST tools/list at the same instant on pre-connected sockets. */
const racePair = async (s, label) => {
  const [sockGet, sockPost] = await Promise.all([connectSocket(srv.port), connectSocket(srv.port)]);
  const id = Math.floor(Math.random() * 1e9);
  // Both requests are written in the same tick, before either can resolve.
  const getP = openGet(srv, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion, socket: sockGet });
  const postP = post(srv, rpc("tools/list", {}, id), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion, socket: sockPost });
  const [g, p] = await Promise.allSettled([getP, postP]);
  assert.equal(g.status, "fulfilled", `${label}: GET failed: ${g.reason?.message}`);
  const st = g.value;
  let getBody = "";
  if (st.status !== 200) getBody = await drain(st);
  st.close();
  assert.equal(st.status, 200, `${label}: concurrent GET answered ${st.status}: ${getBody}`);
  assert.match(String(st.headers["content-type"]), /^text\/event-stream/, `${label}: GET content-type`);
  assert.equal(p.status, "fulfilled", `${label}: POST failed: ${p.reason?.message}`);
  checkToolsList(p.value, id, `${label}: concurrent POST tools/list`);
};

const followUps = async (s, label, n) => {
  const id1 = Math.floor(Math.random() * 1e9);
  const r1 = await post(srv, rpc("tools/list", {}, id1), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  checkToolsList(r1, id1, `${label}: follow-up 1 tools/list`);
  const id2 = Math.floor(Math.random() * 1e9);
  const r2 = await post(
    srv,
    rpc("tools/call", { name: "execute", arguments: { code: `return ${n};` } }, id2),
    { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion },
  );
  assert.equal(r2.status, 200, `${label}: follow-up 2 tools/call status ${r2.status}: ${r2.body}`);
  assert.ok(noStickyFailure(r2), `${label}: follow-up 2 sticky failure: ${r2.body}`);
  const m2 = responseTo(r2, id2);
  assert.ok(m2?.result, `${label}: follow-up 2 no result: ${r2.body}`);
  assert.equal(m2.result.content?.[0]?.text, String(n), `${label}: follow-up 2 text`);
  assert.equal(m2.result.isError, undefined, `${label}: follow-up 2 isError`);
  // A later GET must work too ("so must every later request").
  const g = await openGet(srv, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
  const body = g.status === 200 ? "" : await drain(g);
  g.close();
  assert.equal(g.status, 200, `${label}: follow-up GET answered ${g.status}: ${body}`);
};

test(`idle restore race: ${SESSIONS} sessions x ${ROUNDS} idle rounds, concurrent GET+POST then follow-ups`, { timeout: 120_000 }, async () => {
  const sessions = await Promise.all(
    Array.from({ length: SESSIONS }, async (_, i) => {
      const { client, transport } = await connectSdk(srv, bearer, { name: `acceptance-${i}` });
      const r = await client.callTool(EXECUTE_ONE);
      assert.deepEqual(r.content, [{ type: "text", text: "1" }], `session ${i}: execute content`);
      assert.deepEqual(r.structuredContent, { status: "completed", result: 1, logs: [] }, `session ${i}: structuredContent`);
      assert.ok(!r.isError, `session ${i}: isError`);
      const s = { sessionId: transport.sessionId, protocolVersion: transport.protocolVersion };
      assert.ok(s.sessionId, `session ${i}: no session id`);
      await client.close();
      return s;
    }),
  );
  assert.equal(new Set(sessions.map((s) => s.sessionId)).size, SESSIONS, "session ids are distinct");
  let m = await scrapeMetrics(srv);
  for (let round = 1; round <= ROUNDS; round++) {
    await sleep(PAST_IDLE_MS);
    // The runtimes are disposed now (§11 metrics make sure the race is real).
    const mBefore = await scrapeMetrics(srv);
    const disposed = metricMatching(mBefore, DISPOSED_RE) - metricMatching(m, DISPOSED_RE);
    assert.ok(disposed >= SESSIONS, `round ${round}: ${disposed} runtimes disposed after ${PAST_IDLE_MS} ms idle, want >= ${SESSIONS}`);
    await Promise.all(sessions.map((s, i) => racePair(s, `round ${round} session ${i}`)));
    // Single-flight: one restore per session for the GET+POST pair.
    const afterPair = await scrapeMetrics(srv);
    const restored = metricMatching(afterPair, RESTORED_RE) - metricMatching(mBefore, RESTORED_RE);
    assert.equal(restored, SESSIONS, `round ${round}: restores for ${SESSIONS} concurrent GET+POST pairs`);
    await Promise.all(sessions.map((s, i) => followUps(s, `round ${round} session ${i}`, round * 100 + i)));
    m = await scrapeMetrics(srv);
  }
});

test("idle restore with a GET and ten POSTs at once (single-flight build)", { timeout: 60_000 }, async () => {
  const { client, transport } = await connectSdk(srv, bearer, { name: "acceptance-ten" });
  const r = await client.callTool(EXECUTE_ONE);
  assert.equal(r.content?.[0]?.text, "1");
  const s = { sessionId: transport.sessionId, protocolVersion: transport.protocolVersion };
  await client.close();
  await sleep(PAST_IDLE_MS);
  const mBefore = await scrapeMetrics(srv);
  const socks = await Promise.all(Array.from({ length: 11 }, () => connectSocket(srv.port)));
  const getP = openGet(srv, { bearer, ...s, socket: socks[0] });
  const posts = socks.slice(1).map((sock, i) => post(srv, rpc("tools/list", {}, 500 + i), { bearer, ...s, socket: sock }));
  const [g, ...ps] = await Promise.allSettled([getP, ...posts]);
  assert.equal(g.status, "fulfilled", `GET failed: ${g.reason?.message}`);
  const gBody = g.value.status === 200 ? "" : await drain(g.value);
  g.value.close();
  assert.equal(g.value.status, 200, `GET answered ${g.value.status}: ${gBody}`);
  ps.forEach((p, i) => {
    assert.equal(p.status, "fulfilled", `POST ${i} failed: ${p.reason?.message}`);
    checkToolsList(p.value, 500 + i, `POST ${i}`);
  });
  const mAfter = await scrapeMetrics(srv);
  assert.equal(metricMatching(mAfter, RESTORED_RE) - metricMatching(mBefore, RESTORED_RE), 1, "exactly one restore for the GET and ten POSTs");
  await followUps(s, "after ten", 7);
});
