// SPEC §2 (version negotiation, capabilities, ping, logging/setLevel, SSE
// framing, priming, Last-Event-ID replay, undelivered responses, concurrent
// requests reusing an id), §3 (session id shape, CORS exposure) and §5 (the
// three tools, the result envelope of `return 1;`).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import {
  startServer, post, rpc, openGet, openStream, mcpHeaders, drain, initSession, responseTo, parseSse,
  splitEventId, waitUntil, randomSessionId, SESSION_VERSIONS, NEWEST_SESSION_VERSION, clientInfo,
} from "./harness.mjs";

let srv, bearer;
before(async () => {
  srv = await startServer();
  bearer = srv.mint("protocol@example.com");
});
after(async () => {
  await srv?.cleanup();
});

const initialize = (protocolVersion, extra) =>
  post(srv, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion, capabilities: {}, clientInfo } }, { bearer, extra });

describe("initialize", () => {
  for (const v of SESSION_VERSIONS) {
    test(`negotiation echoes supported ${v}`, async () => {
      const res = await initialize(v);
      assert.equal(res.status, 200, res.body);
      assert.equal(responseTo(res, 1)?.result?.protocolVersion, v, res.body);
    });
  }
  for (const v of ["2024-11-05", "2099-01-01"]) {
    test(`negotiation answers the newest session-based version for unsupported ${v}`, async () => {
      const res = await initialize(v);
      assert.equal(res.status, 200, res.body);
      assert.equal(responseTo(res, 1)?.result?.protocolVersion, NEWEST_SESSION_VERSION, res.body);
    });
  }
  test("capabilities: tools.listChanged and logging; serverInfo", async () => {
    const res = await initialize("2025-06-18");
    const r = responseTo(res, 1)?.result;
    assert.ok(r, res.body);
    assert.equal(r.capabilities?.tools?.listChanged, true, res.body);
    assert.equal(typeof r.capabilities?.logging, "object", res.body);
    assert.ok(r.capabilities.logging !== null);
    assert.equal(typeof r.serverInfo?.name, "string", res.body);
    assert.equal(typeof r.serverInfo?.version, "string", res.body);
  });
  test("session id: URL-safe, >= 128 bits, distinct", async () => {
    const ids = [];
    for (let i = 0; i < 12; i++) ids.push((await initialize("2025-06-18")).headers["mcp-session-id"]);
    for (const id of ids) {
      assert.match(String(id), /^[A-Za-z0-9._~-]+$/, `URL-safe: ${id}`);
      const bits = /^[0-9a-fA-F-]+$/.test(id) ? id.replace(/-/g, "").length * 4 : id.length * 6;
      assert.ok(bits >= 128, `at least 128 bits: ${id} (${bits})`);
    }
    assert.equal(new Set(ids).size, ids.length);
  });
  test("session id visible to browsers through CORS (expose-headers on the response)", async () => {
    const res = await initialize("2025-06-18", { origin: "http://localhost:5173" });
    assert.equal(res.status, 200, res.body);
    assert.ok(res.headers["mcp-session-id"]);
    const acao = res.headers["access-control-allow-origin"];
    assert.ok(acao === "*" || acao === "http://localhost:5173", `access-control-allow-origin: ${acao}`);
    const expose = String(res.headers["access-control-expose-headers"] ?? "").toLowerCase();
    assert.ok(expose.includes("mcp-session-id"), `expose-headers: ${expose}`);
  });
});

describe("requests on a session", () => {
  let s;
  before(async () => {
    s = await initSession(srv, bearer, "2025-06-18");
  });
  const send = (msg, opts = {}) => post(srv, msg, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion, ...opts });

  test("ping → {}", async () => {
    const res = await send(rpc("ping", undefined, 31));
    assert.equal(res.status, 200, res.body);
    assert.deepEqual(responseTo(res, 31)?.result, {}, res.body);
  });
  test("logging/setLevel → {}", async () => {
    const res = await send(rpc("logging/setLevel", { level: "debug" }, 32));
    assert.equal(res.status, 200, res.body);
    assert.deepEqual(responseTo(res, 32)?.result, {}, res.body);
  });
  test("tools/list: execute, skills, resume with description and object input schema", async () => {
    const res = await send(rpc("tools/list", {}, 33));
    const tools = responseTo(res, 33)?.result?.tools;
    assert.ok(Array.isArray(tools), res.body);
    assert.deepEqual(tools.map((t) => t.name).sort(), ["execute", "resume", "skills"]);
    for (const t of tools) {
      assert.equal(typeof t.description, "string");
      assert.ok(t.description.length > 0, `${t.name} description`);
      assert.equal(t.inputSchema?.type, "object", `${t.name} inputSchema`);
    }
    const ex = tools.find((t) => t.name === "execute");
    assert.ok(ex.inputSchema.properties?.code, JSON.stringify(ex.inputSchema));
    assert.ok(ex.description.includes("## Available integrations"), ex.description);
  });
  test("execute: return 1 → text 1 and structured completed envelope; 6*7 → 42", async () => {
    const res = await send(rpc("tools/call", { name: "execute", arguments: { code: "return 1;" } }, 34));
    const r = responseTo(res, 34)?.result;
    assert.ok(r, res.body);
    assert.deepEqual(r.content, [{ type: "text", text: "1" }]);
    assert.deepEqual(r.structuredContent, { status: "completed", result: 1, logs: [] });
    assert.equal(r.isError, undefined);
    const res2 = await send(rpc("tools/call", { name: "execute", arguments: { code: "return 6 * 7;" } }, 35));
    assert.equal(responseTo(res2, 35)?.result?.content?.[0]?.text, "42", res2.body);
  });
  test("resume of an unknown execution → isError execution_not_found", async () => {
    const res = await send(rpc("tools/call", { name: "resume", arguments: { executionId: "exec_00000000-0000-4000-8000-000000000000", action: "accept" } }, 36));
    const r = responseTo(res, 36)?.result;
    assert.ok(r, res.body);
    assert.equal(r.isError, true, res.body);
    assert.equal(r.structuredContent?.status, "execution_not_found", res.body);
  });

  test("SSE framing of a tools/call stream: priming event, then id/event/data", async () => {
    const res = await send(rpc("tools/call", { name: "execute", arguments: { code: "console.log('hi'); return 'x';" } }, 40));
    assert.equal(res.status, 200, res.body);
    assert.match(String(res.headers["content-type"]), /^text\/event-stream/);
    // Every message event is exactly `id: <stream>:<seq>\nevent: message\ndata: <json>\n\n`.
    const blocks = res.body.split("\n\n").filter((b) => b.trim() !== "");
    const events = parseSse(res.body).filter((e) => e.comments.length === 0 || e.id || e.data);
    assert.ok(events.length >= 2, `priming + response expected: ${res.body}`);
    const priming = events[0];
    assert.ok(splitEventId(priming.id), `priming event has an id <stream>:<seq>: ${JSON.stringify(priming.raw)}`);
    assert.ok(
      priming.data === undefined || priming.data === "" || priming.message?.method === "notifications/message",
      `priming data must be empty or notifications/message: ${JSON.stringify(priming.raw)}`,
    );
    const withMsg = events.filter((e) => e.message);
    assert.ok(withMsg.length >= 1, res.body);
    for (const e of withMsg) {
      assert.ok(splitEventId(e.id), `id <stream>:<seq>: ${JSON.stringify(e.raw)}`);
      assert.equal(e.event, "message", JSON.stringify(e.raw));
      assert.ok(blocks.includes(`id: ${e.id}\nevent: message\ndata: ${e.data}`), `exact framing: ${JSON.stringify(e.raw)}`);
    }
    const ids = events.filter((e) => e.id).map((e) => splitEventId(e.id));
    assert.equal(new Set(ids.map((i) => i.stream)).size, 1, `one stream id per stream: ${res.body}`);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i].seq > ids[i - 1].seq, `seq increases: ${res.body}`);
    const resp = withMsg.find((e) => e.message.id === 40);
    assert.ok(resp, res.body);
    assert.equal(resp.message.result.content[0].text, "x\n\nLogs:\n[log] hi");
  });

  test("a slow answer's stream: headers and the priming event first, the answer when it comes", async () => {
    // A fast answer leaves in one write with its headers; a slow one must
    // not hold them: the priming event's id is what lets a client resume.
    const st = await openStream(srv.mcpUrl, {
      method: "POST",
      headers: mcpHeaders({ bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion }),
      body: rpc("tools/call", { name: "execute", arguments: { code: "await new Promise((r) => setTimeout(r, 3000)); return 'late';" } }, 42),
    });
    assert.equal(st.status, 200);
    await waitUntil("the priming event", () => st.events.length >= 1, { ms: 2000 });
    assert.ok(splitEventId(st.events[0].id), JSON.stringify(st.events[0]));
    assert.ok(!st.events.some((e) => e.data?.includes('"id":42')), `the answer came with the priming event: ${st.text}`);
    await drain(st, 10_000);
    assert.ok(st.events.some((e) => e.data?.includes('"late"')), st.text);
  });

  test("standalone GET: 200 text/event-stream, headers at once, then a priming event", async () => {
    const t0 = Date.now();
    const st = await openGet(srv, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion, headersTimeoutMs: 5000 });
    try {
      assert.equal(st.status, 200);
      assert.ok(Date.now() - t0 < 5000);
      assert.match(String(st.headers["content-type"]), /^text\/event-stream/);
      const prime = await st.waitFor((evs) => evs.find((e) => e.id), 5000);
      assert.ok(splitEventId(prime.id), `priming id: ${JSON.stringify(prime.raw)}`);
    } finally {
      st.close();
    }
  });

  test("several GET streams may be open at once", async () => {
    const a = await openGet(srv, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
    const b = await openGet(srv, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
    try {
      assert.equal(a.status, 200, await (a.status === 200 ? "" : drain(a)));
      assert.equal(b.status, 200, await (b.status === 200 ? "" : drain(b)));
      // and the session still answers POSTs while both are open
      const res = await send(rpc("ping", undefined, 41));
      assert.deepEqual(responseTo(res, 41)?.result, {}, res.body);
    } finally {
      a.close();
      b.close();
    }
  });

  test("Last-Event-ID on GET replays the events after it on that stream", async () => {
    const res = await send(rpc("tools/call", { name: "execute", arguments: { code: "return 'replay-me';" } }, 42));
    const events = parseSse(res.body);
    const priming = events.find((e) => e.id);
    const original = events.find((e) => e.message?.id === 42);
    assert.ok(priming && original, res.body);
    const st = await openGet(srv, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion, lastEventId: priming.id });
    try {
      assert.equal(st.status, 200, await (st.status === 200 ? "" : drain(st)));
      const replayed = await st.waitFor((evs) => evs.find((e) => e.message?.id === 42), 5000);
      assert.equal(replayed.id, original.id, "replayed with its original event id");
      assert.equal(replayed.event, "message");
      assert.equal(replayed.message.result.content[0].text, "replay-me");
    } finally {
      st.close();
    }
  });

  test("a response whose POST stream died is replayed on the next GET", async () => {
    const id = 43;
    const tag = `late-${randomSessionId()}`; // finds this run in `executions list`
    const code = `// ${tag}\nawait new Promise((r) => setTimeout(r, 1000)); return 'late';`;
    const st = await openStream(srv.mcpUrl, {
      method: "POST",
      headers: mcpHeaders({ bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion }),
      body: rpc("tools/call", { name: "execute", arguments: { code } }, id),
    });
    assert.equal(st.status, 200);
    await st.waitFor((evs) => evs.find((e) => e.id), 5000); // the priming event
    st.close(); // the socket dies before the response is written
    // The run is recorded before its answer is logged for replay; no GET is open meanwhile.
    const finished = new RegExp(`\\tcompleted\\t.*// ${tag}$`, "m");
    await waitUntil("the execution to finish", () => finished.test(srv.cli(["executions", "list", "--data-dir", srv.dataDir])), { every: 100 });
    const g = await openGet(srv, { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
    try {
      assert.equal(g.status, 200, await (g.status === 200 ? "" : drain(g)));
      const ev = await g.waitFor((evs) => evs.find((e) => e.message?.id === id), 5000);
      assert.equal(ev.message.result.content[0].text, "late");
      assert.equal(ev.event, "message");
      assert.ok(splitEventId(ev.id), ev.raw);
    } finally {
      g.close();
    }
  });

  test("concurrent POSTs reusing one JSON-RPC id each get their own answer", async () => {
    const N = 6;
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        send(rpc("tools/call", { name: "execute", arguments: { code: `await new Promise((r) => setTimeout(r, ${(N - i) * 40})); return ${i};` } }, 7)),
      ),
    );
    results.forEach((res, i) => {
      assert.equal(res.status, 200, res.body);
      const answers = parseSse(res.body).filter((e) => e.message?.id === 7);
      assert.equal(answers.length, 1, `exactly one answer on stream ${i}: ${res.body}`);
      assert.equal(answers[0].message.result.content[0].text, String(i), `stream ${i}: ${res.body}`);
    });
  });
});
