// SPEC §3 (restore after idle, restart after kill -9, DELETE) and §4 (a revoked
// bearer stops working at once, also on a live session), through the official
// SDK client resuming a session id, plus raw checks of the durable record.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  startServer, connectSdk, post, rpc, openGet, drain, initSession, responseTo, noStickyFailure,
  request, sleep, PAST_IDLE_MS, EXECUTE_ONE,
} from "./harness.mjs";

let srv, bearer;
before(async () => {
  srv = await startServer();
  bearer = srv.mint("sessions@example.com");
});
after(async () => {
  await srv?.cleanup();
});

const callReturns = async (client, n, label) => {
  const r = await client.callTool({ name: "execute", arguments: { code: `return ${n};` } });
  assert.deepEqual(r.content, [{ type: "text", text: String(n) }], `${label}: ${JSON.stringify(r)}`);
  assert.deepEqual(r.structuredContent, { status: "completed", result: n, logs: [] }, label);
};

const getOk = async (sessionId, protocolVersion, label, token = bearer) => {
  const st = await openGet(srv, { bearer: token, sessionId, protocolVersion });
  const body = st.status === 200 ? "" : await drain(st);
  st.close();
  assert.equal(st.status, 200, `${label}: GET ${st.status} ${body}`);
};

test("a fresh SDK client resumes a session id after the runtime went idle", { timeout: 60_000 }, async () => {
  const a = await connectSdk(srv, bearer);
  await callReturns(a.client, 1, "first client");
  const sessionId = a.transport.sessionId;
  const protocolVersion = a.transport.protocolVersion;
  await a.client.close();
  await sleep(PAST_IDLE_MS);
  const b = await connectSdk(srv, bearer, { sessionId });
  try {
    assert.equal(b.transport.sessionId, sessionId);
    const { tools } = await b.client.listTools();
    assert.ok(tools.some((t) => t.name === "execute"));
    await callReturns(b.client, 2, "resumed client");
    await callReturns(b.client, 3, "resumed client, again");
  } finally {
    await b.client.close();
  }
  await getOk(sessionId, protocolVersion, "after resume");
});

test("sessions survive kill -9 + restart on the same data dir and port", { timeout: 90_000 }, async () => {
  // (1) a session whose client stays open across the crash
  const live = await connectSdk(srv, bearer, { name: "live-across-crash" });
  await callReturns(live.client, 1, "live before crash");
  // (2) a session resumed by a fresh client after the restart
  const a = await connectSdk(srv, bearer, { name: "resumed-after-crash" });
  await callReturns(a.client, 1, "before crash");
  const sid = a.transport.sessionId;
  const pv = a.transport.protocolVersion;
  await a.client.close();
  // (3) raw sessions whose negotiated version matters (batches) and one terminated
  const old = await initSession(srv, bearer, "2025-03-26");
  const mid = await initSession(srv, bearer, "2025-06-18");
  const dead = await initSession(srv, bearer, "2025-06-18");
  const del = await request(srv.mcpUrl, { method: "DELETE", headers: { authorization: `Bearer ${bearer}`, "mcp-session-id": dead.sessionId } });
  assert.equal(del.status, 200, del.body);
  const other = srv.mint("someone-else@example.com");

  await srv.kill9();
  await srv.restart();

  const b = await connectSdk(srv, bearer, { sessionId: sid });
  try {
    assert.equal(b.transport.sessionId, sid);
    await callReturns(b.client, 2, "resumed after restart");
    const { tools } = await b.client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ["execute", "resume", "skills"]);
  } finally {
    await b.client.close();
  }
  await getOk(sid, pv, "after restart");

  // the client that never closed keeps working without re-initializing
  try {
    await callReturns(live.client, 5, "live client after restart");
  } finally {
    await live.client.close().catch(() => {});
  }

  // the negotiated protocol version is part of the durable record
  const batchOld = await post(srv, [rpc("ping", undefined, 1), rpc("ping", undefined, 2)], { bearer, sessionId: old.sessionId, protocolVersion: old.protocolVersion });
  assert.equal(batchOld.status, 200, `2025-03-26 batch after restart: ${batchOld.body}`);
  const batchMid = await post(srv, [rpc("ping", undefined, 1), rpc("ping", undefined, 2)], { bearer, sessionId: mid.sessionId, protocolVersion: mid.protocolVersion });
  assert.equal(batchMid.status, 400, `2025-06-18 batch after restart: ${batchMid.body}`);
  assert.equal(batchMid.json?.error?.code, -32600, batchMid.body);
  // terminated stays terminated
  const gone = await post(srv, rpc("tools/list"), { bearer, sessionId: dead.sessionId, protocolVersion: dead.protocolVersion });
  assert.equal(gone.status, 404, gone.body);
  assert.equal(gone.json?.error?.message, "Session terminated, please reconnect", gone.body);
  // ownership survives, and the foreign request leaves the session intact
  const foreign = await post(srv, rpc("tools/list"), { bearer: other, sessionId: mid.sessionId, protocolVersion: mid.protocolVersion });
  assert.equal(foreign.status, 403, foreign.body);
  assert.equal(foreign.json?.error?.code, -32003, foreign.body);
  const mine = await post(srv, rpc("tools/list", {}, 3), { bearer, sessionId: mid.sessionId, protocolVersion: mid.protocolVersion });
  assert.equal(mine.status, 200, mine.body);
  assert.ok(responseTo(mine, 3)?.result?.tools, mine.body);
});

test("kill -9 right after a restore race: the session still answers after restart", { timeout: 60_000 }, async () => {
  const s = await initSession(srv, bearer, "2025-06-18");
  await sleep(PAST_IDLE_MS);
  const [g, p] = await Promise.all([
    openGet(srv, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion }),
    post(srv, rpc("tools/list", {}, 4), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion }),
  ]);
  g.close();
  assert.equal(g.status, 200);
  assert.equal(p.status, 200, p.body);
  await srv.kill9();
  await srv.restart();
  for (let i = 0; i < 2; i++) {
    const r = await post(srv, rpc("tools/call", EXECUTE_ONE, 10 + i), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
    assert.equal(r.status, 200, r.body);
    assert.ok(noStickyFailure(r), r.body);
    assert.equal(responseTo(r, 10 + i)?.result?.content?.[0]?.text, "1", r.body);
  }
});

test("a revoked bearer stops working at once on a live session", { timeout: 30_000 }, async () => {
  const token = srv.mint("revoke-me@example.com");
  const { client, transport } = await connectSdk(srv, token);
  try {
    await callReturns(client, 1, "before revoke");
    const sessionId = transport.sessionId;
    const pv = transport.protocolVersion;
    // The server now holds the token as verified (its token cache, kept
    // per access revision); the revocation must still count at once.
    const warm = await post(srv, rpc("tools/list", {}, 4), { bearer: token, sessionId, protocolVersion: pv });
    assert.equal(warm.status, 200, warm.body);
    srv.revoke(token);
    const res = await post(srv, rpc("tools/list"), { bearer: token, sessionId, protocolVersion: pv });
    assert.equal(res.status, 401, res.body);
    assert.ok(String(res.headers["www-authenticate"]).includes('error="invalid_token"'), res.headers["www-authenticate"]);
    await assert.rejects(client.callTool(EXECUTE_ONE), "the SDK call with a revoked bearer must fail");
    const st = await openGet(srv, { bearer: token, sessionId, protocolVersion: pv });
    const body = await drain(st);
    assert.equal(st.status, 401, `GET with revoked bearer: ${body}`);
    // the session belongs to (account, org), not to the token: a new token of the same owner works
    const again = srv.mint("revoke-me@example.com");
    const ok = await post(srv, rpc("tools/list", {}, 5), { bearer: again, sessionId, protocolVersion: pv });
    assert.equal(ok.status, 200, ok.body);
    assert.ok(responseTo(ok, 5)?.result?.tools, ok.body);
  } finally {
    await client.close().catch(() => {});
  }
});

test("a token minted while the server runs is accepted at once", async () => {
  const t = srv.mint(`fresh-${Date.now()}@example.com`, "fresh-org");
  const { sessionId } = await initSession(srv, t);
  assert.ok(sessionId);
});

test("DELETE through the SDK terminates the session", { timeout: 30_000 }, async () => {
  const { client, transport } = await connectSdk(srv, bearer);
  await callReturns(client, 1, "before DELETE");
  const sessionId = transport.sessionId;
  const pv = transport.protocolVersion;
  await transport.terminateSession();
  await client.close();
  const res = await post(srv, rpc("tools/list"), { bearer, sessionId, protocolVersion: pv });
  assert.equal(res.status, 404, res.body);
  assert.equal(res.json?.error?.code, -32001, res.body);
  assert.equal(res.json?.error?.message, "Session terminated, please reconnect", res.body);
  // a fresh client resuming the terminated id fails rather than silently working
  const b = await connectSdk(srv, bearer, { sessionId });
  try {
    await assert.rejects(b.client.callTool(EXECUTE_ONE));
  } finally {
    await b.client.close();
  }
  // still terminated after the idle timeout (the record keeps the flag)
  await sleep(PAST_IDLE_MS);
  const later = await post(srv, rpc("tools/list"), { bearer, sessionId, protocolVersion: pv });
  assert.equal(later.status, 404, later.body);
});
