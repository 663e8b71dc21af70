// SPEC §11 shutdown and §4 revocation, end to end: SIGTERM drains — the
// standalone GET stream ends, /healthz and new requests answer 503, an
// `execute` in flight on its POST's SSE stream still gets its answer and
// its record — then the process exits; a second signal exits at once; a
// revoked token's GET stream closes within 5 s.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startServer, initSession, openGet, openStream, mcpHeaders, post, request, rpc, waitUntil } from "./harness.mjs";

const LOOP_MS = 3000;
const loop = { name: "execute", arguments: { code: `const t = Date.now(); while (Date.now() - t < ${LOOP_MS}) {} return 'finished';` } };

const exited = (child) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve(child.exitCode)
    : new Promise((r) => child.once("exit", (code) => r(code)));

const startExecute = async (srv, bearer, sessionId, protocolVersion) =>
  openStream(srv.mcpUrl, {
    method: "POST",
    headers: { ...mcpHeaders({ bearer, sessionId, protocolVersion }), "content-type": "application/json" },
    body: rpc("tools/call", loop, 77),
  });

test("shutdown: SIGTERM lets an execute in flight on SSE finish, recorded, while new work gets 503", async () => {
  const srv = await startServer();
  try {
    const bearer = srv.mint("drain@example.com");
    const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
    const get = await openGet(srv, { bearer, sessionId, protocolVersion });
    assert.equal(get.status, 200);
    const call = await startExecute(srv, bearer, sessionId, protocolVersion);
    assert.equal(call.status, 200);
    // The priming event: the request is in flight (counted from its arrival).
    await call.waitFor((evs) => evs.length >= 1);
    const child = srv.child;
    const t0 = Date.now();
    child.kill("SIGTERM");
    // The GET stream ends promptly.
    await get.waitFor(() => get.ended, 3000).catch(() => {});
    assert.ok(get.ended, "the standalone GET stream ends on SIGTERM");
    // While draining: /healthz and new MCP requests answer 503.
    const health = await request(`${srv.base}/healthz`, { method: "GET" });
    assert.equal(health.status, 503);
    const fresh = await post(srv, rpc("tools/list", {}), { bearer, sessionId, protocolVersion });
    assert.equal(fresh.status, 503);
    assert.equal(fresh.headers["retry-after"], "1");
    // The in-flight execute still answers on its own stream.
    const answer = await call.waitFor((evs) => evs.map((e) => e.message).find((m) => m?.id === 77), 15_000);
    assert.equal(answer.result.structuredContent.result, "finished");
    const code = await exited(child);
    assert.equal(code, 0);
    assert.ok(Date.now() - t0 >= LOOP_MS - 1000, "it waited for the execution");
    // After a restart the execution is on record.
    const list = srv.cli(["executions", "list", "--data-dir", srv.dataDir]);
    assert.match(list, /completed/, list);
    await srv.restart();
    const again = await post(srv, rpc("tools/list", {}), { bearer, sessionId, protocolVersion });
    assert.equal(again.status, 200, "the session survives the restart");
  } finally {
    await srv.cleanup();
  }
});

test("shutdown: SIGINT drains a JSON-only execute in flight too", async () => {
  const srv = await startServer();
  try {
    const bearer = srv.mint("json-drain@example.com");
    const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
    const answer = post(srv, rpc("tools/call", loop, 78), { bearer, sessionId, protocolVersion, accept: "application/json", timeoutMs: 20_000 });
    // In flight once the server counts it.
    await waitUntil("the execution runs", async () => {
      const res = await request(`${srv.base}/metrics`, { method: "GET" });
      return /executor_executions_running 1/.test(res.body);
    });
    const child = srv.child;
    child.kill("SIGINT");
    const res = await answer;
    assert.equal(res.status, 200);
    assert.equal(res.json.result.structuredContent.result, "finished");
    assert.equal(await exited(child), 0);
  } finally {
    await srv.cleanup();
  }
});

test("shutdown: work whose client went away is still finished and recorded", async () => {
  const srv = await startServer();
  try {
    const bearer = srv.mint("gone@example.com");
    const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
    const call = await startExecute(srv, bearer, sessionId, protocolVersion);
    await call.waitFor((evs) => evs.length >= 1);
    call.close();
    const child = srv.child;
    const t0 = Date.now();
    child.kill("SIGTERM");
    assert.equal(await exited(child), 0);
    assert.ok(Date.now() - t0 >= LOOP_MS - 1000, `exited after ${Date.now() - t0} ms, before the run ended`);
    const list = srv.cli(["executions", "list", "--data-dir", srv.dataDir]);
    assert.match(list, /completed/, list);
  } finally {
    await srv.cleanup();
  }
});

test("shutdown: a second SIGTERM exits at once", async () => {
  const srv = await startServer();
  try {
    const bearer = srv.mint("twice@example.com");
    const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
    const call = await startExecute(srv, bearer, sessionId, protocolVersion);
    await call.waitFor((evs) => evs.length >= 1);
    const child = srv.child;
    const t0 = Date.now();
    child.kill("SIGTERM");
    // The first signal was taken: the server drains (healthz 503) and waits for the run.
    const health = () => request(`${srv.base}/healthz`, { method: "GET" }).then((r) => r.status === 503, () => false);
    await waitUntil("the drain to start", health, { ms: 2000, every: 20 });
    assert.equal(child.exitCode, null, "still draining after the first signal");
    child.kill("SIGTERM");
    await exited(child);
    assert.ok(Date.now() - t0 < LOOP_MS - 1000, `exited after ${Date.now() - t0} ms`);
  } finally {
    await srv.cleanup();
  }
});

test("revocation: a revoked token's open GET stream closes within 5 s", async () => {
  const srv = await startServer();
  try {
    const bearer = srv.mint("revoke@example.com");
    const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
    const get = await openGet(srv, { bearer, sessionId, protocolVersion });
    assert.equal(get.status, 200);
    const t0 = Date.now();
    srv.revoke(bearer);
    await get.waitFor(() => get.ended, 6000).catch(() => {});
    assert.ok(get.ended, "the stream is closed");
    assert.ok(Date.now() - t0 <= 5000, `closed after ${Date.now() - t0} ms`);
    const refused = await post(srv, rpc("tools/list", {}), { bearer, sessionId, protocolVersion });
    assert.equal(refused.status, 401);
    // A POST's own stream closes too, while its work goes on.
    const other = srv.mint("revoke2@example.com");
    const second = await initSession(srv, other, "2025-11-25");
    const long = { name: "execute", arguments: { code: "const t = Date.now(); while (Date.now() - t < 9000) {} return 1" } };
    const call = await openStream(srv.mcpUrl, {
      method: "POST",
      headers: { ...mcpHeaders({ bearer: other, sessionId: second.sessionId, protocolVersion: second.protocolVersion }), "content-type": "application/json" },
      body: rpc("tools/call", long, 79),
    });
    await call.waitFor((evs) => evs.length >= 1);
    const t1 = Date.now();
    srv.revoke(other);
    await call.waitFor(() => call.ended, 6000).catch(() => {});
    assert.ok(call.ended, "the POST stream is closed");
    assert.ok(Date.now() - t1 <= 5000, `closed after ${Date.now() - t1} ms`);
  } finally {
    await srv.cleanup();
  }
});
