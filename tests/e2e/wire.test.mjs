// SPEC §2: the rows of the Streamable HTTP table, the order of checks, batches,
// the mcp-protocol-version header, and the protected-resource metadata (§4).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import {
  startServer, request, post, rpc, note, openGet, drain, initSession, randomSessionId, responseTo, messagesOf,
} from "./harness.mjs";

let srv, alice, bob, aliceOtherOrg;
before(async () => {
  srv = await startServer();
  alice = srv.mint("alice@example.com");
  bob = srv.mint("bob@example.com");
  aliceOtherOrg = srv.mint("alice@example.com", "other-org");
});
after(async () => {
  await srv?.cleanup();
});

const UNAUTHORIZED_BODY = { jsonrpc: "2.0", error: { code: -32001, message: "Unauthorized" }, id: null };

/** Assert a JSON-RPC error response. */
const rpcError = (res, status, code, message) => {
  assert.equal(res.status, status, `status (want ${status}) body=${res.body}`);
  assert.ok(res.json, `a JSON-RPC error body is expected, got ${JSON.stringify(res.body)}`);
  assert.equal(res.json.jsonrpc, "2.0", `jsonrpc field in ${res.body}`);
  assert.ok(res.json.error, `error object in ${res.body}`);
  if (code !== undefined) assert.equal(res.json.error.code, code, `error code in ${res.body}`);
  if (message !== undefined) assert.equal(res.json.error.message, message, `error message in ${res.body}`);
};

const headerList = (v) => String(v ?? "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);

describe("CORS preflight and method allow-list", () => {
  test("OPTIONS → 204 with CORS headers, no auth needed", async () => {
    const res = await request(srv.mcpUrl, {
      method: "OPTIONS",
      headers: {
        origin: "http://localhost:5173",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, mcp-session-id, mcp-protocol-version, last-event-id, accept",
      },
    });
    assert.equal(res.status, 204, res.body);
    const acao = res.headers["access-control-allow-origin"];
    assert.ok(acao === "*" || acao === "http://localhost:5173", `access-control-allow-origin: ${acao}`);
    const methods = headerList(res.headers["access-control-allow-methods"]);
    for (const m of ["get", "post", "delete", "options"]) assert.ok(methods.includes(m), `allow-methods lacks ${m}: ${methods}`);
    const allowHeaders = headerList(res.headers["access-control-allow-headers"]);
    for (const h of ["authorization", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id", "accept"])
      assert.ok(allowHeaders.includes(h), `allow-headers lacks ${h}: ${allowHeaders}`);
    const expose = headerList(res.headers["access-control-expose-headers"]);
    for (const h of ["mcp-session-id", "www-authenticate"]) assert.ok(expose.includes(h), `expose-headers lacks ${h}: ${expose}`);
  });

  test("OPTIONS without Origin still 204 (before auth)", async () => {
    const res = await request(srv.mcpUrl, { method: "OPTIONS" });
    assert.equal(res.status, 204, res.body);
  });

  for (const method of ["PUT", "PATCH"]) {
    test(`${method} → 405 -32001 "Method not allowed", before auth`, async () => {
      const res = await request(srv.mcpUrl, { method, headers: { "content-type": "application/json" }, body: "{}" });
      rpcError(res, 405, -32001, "Method not allowed");
      const authed = await request(srv.mcpUrl, { method, headers: { authorization: `Bearer ${alice}`, "content-type": "application/json" }, body: "{}" });
      rpcError(authed, 405, -32001, "Method not allowed");
    });
  }
});

describe("Host / Origin guard (DNS rebinding)", () => {
  const init = (extra, bearer = alice) =>
    post(srv, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } }, { bearer, extra });

  test("foreign Host → 403 JSON-RPC error, before auth", async () => {
    rpcError(await init({ host: `evil.example.com:${srv.port}` }), 403);
    rpcError(await init({ host: `evil.example.com:${srv.port}` }, null), 403);
  });
  test("foreign Origin → 403 JSON-RPC error, before auth", async () => {
    rpcError(await init({ origin: "http://evil.example.com" }), 403);
    rpcError(await init({ origin: "https://attacker.test" }, null), 403);
  });
  test("foreign Host on GET → 403", async () => {
    const st = await openGet(srv, { bearer: alice, sessionId: randomSessionId(), extra: { host: "rebind.attacker.test" } });
    const body = await drain(st);
    assert.equal(st.status, 403, body);
  });
  test("loopback Host and Origin are allowed", async () => {
    for (const extra of [
      { host: `localhost:${srv.port}` },
      { host: `127.0.0.1:${srv.port}` },
      { origin: `http://localhost:${srv.port}` },
      { origin: "http://127.0.0.1:5173" },
      { origin: "http://localhost:3000" },
    ]) {
      const res = await init(extra);
      assert.equal(res.status, 200, `${JSON.stringify(extra)} → ${res.status} ${res.body}`);
    }
  });
});

describe("authentication", () => {
  const metadataUrl = () => `${srv.origin}/.well-known/oauth-protected-resource/mcp`;

  test("no bearer → 401 exact body and WWW-Authenticate resource_metadata", async () => {
    for (const method of ["POST", "GET", "DELETE"]) {
      const res = await request(srv.mcpUrl, {
        method,
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: method === "POST" ? JSON.stringify(rpc("tools/list")) : undefined,
      });
      assert.equal(res.status, 401, `${method}: ${res.body}`);
      assert.deepEqual(res.json, UNAUTHORIZED_BODY, `${method} body: ${res.body}`);
      const wa = String(res.headers["www-authenticate"] ?? "");
      assert.match(wa, /^Bearer\s/i, `${method} www-authenticate: ${wa}`);
      assert.ok(wa.includes(`resource_metadata="${metadataUrl()}"`), `${method} www-authenticate: ${wa}`);
      assert.ok(!/error=/.test(wa), `no error code without a credential (RFC 6750): ${wa}`);
    }
  });

  test("non-Bearer Authorization → 401 like no bearer", async () => {
    const res = await post(srv, rpc("tools/list"), { extra: { authorization: "Basic YWxpY2U6cHc=" } });
    assert.equal(res.status, 401, res.body);
    assert.deepEqual(res.json, UNAUTHORIZED_BODY);
  });

  test("bad bearer → 401, same body, invalid_token challenge", async () => {
    const res = await post(srv, rpc("tools/list"), { bearer: "not-a-real-token" });
    assert.equal(res.status, 401, res.body);
    assert.deepEqual(res.json, UNAUTHORIZED_BODY, res.body);
    const wa = String(res.headers["www-authenticate"] ?? "");
    assert.match(wa, /^Bearer\s/i, wa);
    assert.ok(wa.includes(`resource_metadata="${metadataUrl()}"`), wa);
    assert.ok(wa.includes('error="invalid_token"'), wa);
    assert.match(wa, /error_description="[^"]+"/, wa);
  });

  test("revoked bearer → 401 invalid_token", async () => {
    const t = srv.mint("revoked@example.com");
    const { sessionId } = await initSession(srv, t);
    srv.revoke(t);
    const res = await post(srv, rpc("tools/list"), { bearer: t, sessionId });
    assert.equal(res.status, 401, res.body);
    assert.deepEqual(res.json, UNAUTHORIZED_BODY, res.body);
    assert.ok(String(res.headers["www-authenticate"]).includes('error="invalid_token"'), res.headers["www-authenticate"]);
  });

  test("protected-resource metadata document (RFC 9728)", async () => {
    const res = await request(metadataUrl(), { method: "GET" });
    assert.equal(res.status, 200, res.body);
    assert.ok(res.json, res.body);
    assert.equal(res.json.resource, `${srv.origin}/mcp`);
    assert.ok(Array.isArray(res.json.authorization_servers), res.body);
    assert.deepEqual(res.json.bearer_methods_supported, ["header"]);
  });

  test("order: auth before session lookup (no bearer + unknown session → 401)", async () => {
    const res = await post(srv, rpc("tools/list"), { sessionId: randomSessionId(), protocolVersion: "2025-06-18" });
    assert.equal(res.status, 401, res.body);
  });
});

describe("sessions on the wire", () => {
  test("unknown session id → 404 -32001 Session not found (POST, GET, DELETE)", async () => {
    const sid = randomSessionId();
    rpcError(await post(srv, rpc("tools/list"), { bearer: alice, sessionId: sid, protocolVersion: "2025-06-18" }), 404, -32001, "Session not found");
    const st = await openGet(srv, { bearer: alice, sessionId: sid });
    const body = await drain(st);
    assert.equal(st.status, 404, body);
    const del = await request(srv.mcpUrl, { method: "DELETE", headers: { authorization: `Bearer ${alice}`, "mcp-session-id": sid } });
    assert.equal(del.status, 404, del.body);
  });

  test("DELETE → 200, then 404 -32001 Session terminated, please reconnect", async () => {
    const { sessionId, protocolVersion } = await initSession(srv, alice);
    const del = await request(srv.mcpUrl, { method: "DELETE", headers: { authorization: `Bearer ${alice}`, "mcp-session-id": sessionId, "mcp-protocol-version": protocolVersion } });
    assert.equal(del.status, 200, del.body);
    rpcError(await post(srv, rpc("tools/list"), { bearer: alice, sessionId, protocolVersion }), 404, -32001, "Session terminated, please reconnect");
    const st = await openGet(srv, { bearer: alice, sessionId, protocolVersion });
    const body = await drain(st);
    assert.equal(st.status, 404, body);
  });

  test("session of another account → 403 -32003, session untouched for its owner", async () => {
    const { sessionId, protocolVersion } = await initSession(srv, alice);
    const msg = "MCP session does not belong to the current bearer";
    rpcError(await post(srv, rpc("tools/list"), { bearer: bob, sessionId, protocolVersion }), 403, -32003, msg);
    const st = await openGet(srv, { bearer: bob, sessionId, protocolVersion });
    const body = await drain(st);
    assert.equal(st.status, 403, body);
    const del = await request(srv.mcpUrl, { method: "DELETE", headers: { authorization: `Bearer ${bob}`, "mcp-session-id": sessionId } });
    rpcError(del, 403, -32003, msg);
    // order: ownership before transport checks (a bad accept from the foreign bearer is still 403)
    rpcError(await post(srv, rpc("tools/list"), { bearer: bob, sessionId, protocolVersion, accept: "text/html" }), 403, -32003);
    // still works for its owner, POST and tools/call
    const ok = await post(srv, rpc("tools/list", {}, 9), { bearer: alice, sessionId, protocolVersion });
    assert.equal(ok.status, 200, ok.body);
    assert.ok(responseTo(ok, 9)?.result?.tools, ok.body);
    const call = await post(srv, rpc("tools/call", { name: "execute", arguments: { code: "return 1;" } }, 10), { bearer: alice, sessionId, protocolVersion });
    assert.equal(call.status, 200, call.body);
    assert.equal(responseTo(call, 10)?.result?.content?.[0]?.text, "1", call.body);
  });

  test("same account in another org is another owner → 403 -32003", async () => {
    const { sessionId, protocolVersion } = await initSession(srv, alice);
    rpcError(await post(srv, rpc("tools/list"), { bearer: aliceOtherOrg, sessionId, protocolVersion }), 403, -32003, "MCP session does not belong to the current bearer");
    const ok = await post(srv, rpc("tools/list", {}, 3), { bearer: alice, sessionId, protocolVersion });
    assert.equal(ok.status, 200, ok.body);
  });

  test("order: session lookup before transport checks (unknown session + invalid JSON → 404)", async () => {
    const res = await post(srv, "{not json", { bearer: alice, sessionId: randomSessionId(), protocolVersion: "2025-06-18" });
    assert.equal(res.status, 404, res.body);
  });
});

describe("POST transport checks", () => {
  let s;
  before(async () => {
    s = await initSession(srv, alice, "2025-06-18");
  });
  const send = (body, opts = {}) => post(srv, body, { bearer: alice, sessionId: s.sessionId, protocolVersion: s.protocolVersion, ...opts });

  test("accept without application/json or text/event-stream → 406 -32000", async () => {
    rpcError(await send(rpc("tools/list"), { accept: "text/html" }), 406, -32000);
  });
  test("content-type not JSON → 415 -32000", async () => {
    rpcError(await send(rpc("tools/list"), { extra: { "content-type": "text/plain" } }), 415, -32000);
  });
  test("body over 4 MiB → 413 -32000; just under is served", async () => {
    const wrap = (pad) => JSON.stringify(rpc("tools/call", { name: "execute", arguments: { code: `return 1; // ${pad}` } }, 77));
    const baseLen = Buffer.byteLength(wrap(""));
    const over = wrap("x".repeat(4 * 1024 * 1024 + 1 - baseLen));
    assert.equal(Buffer.byteLength(over), 4 * 1024 * 1024 + 1);
    // Like any HTTP client, send the whole body; the client must get to read the
    // 413 (an early close races the upload, so try a few times, both clients).
    for (let i = 0; i < 3; i++) {
      let res;
      try {
        res = await send(over);
      } catch (e) {
        assert.fail(`attempt ${i}: no 413 reached the client: ${e.code ?? e.message} (the connection was closed while the body was being sent)`);
      }
      rpcError(res, 413, -32000);
      let fres;
      try {
        fres = await fetch(srv.mcpUrl, {
          method: "POST",
          headers: { authorization: `Bearer ${alice}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": s.sessionId, "mcp-protocol-version": s.protocolVersion },
          body: over,
        });
      } catch (e) {
        assert.fail(`attempt ${i}: fetch saw no 413: ${e.cause?.code ?? e.message} (the connection was closed while the body was being sent)`);
      }
      assert.equal(fres.status, 413, await fres.text());
    }
    const under = wrap("x".repeat(4 * 1024 * 1024 - 1024 - baseLen));
    const ok = await send(under);
    assert.equal(ok.status, 200, ok.body.slice(0, 500));
    assert.equal(responseTo(ok, 77)?.result?.content?.[0]?.text, "1", ok.body.slice(0, 500));
  });
  test("invalid JSON → 400 -32700 Parse error", async () => {
    rpcError(await send('{"jsonrpc": "2.0", "id": 1, "method": '), 400, -32700, "Parse error");
  });
  test("not a JSON-RPC message → 400 -32600 Invalid Request", async () => {
    const bad = [];
    for (const body of ['{"foo":1}', "42", '"ping"', '{"jsonrpc":"1.0","id":1,"method":"ping"}', '{"jsonrpc":"2.0","id":1,"method":5}', "null"]) {
      const res = await send(body);
      try {
        rpcError(res, 400, -32600, "Invalid Request");
      } catch (e) {
        bad.push(`${body} → ${res.status} ${res.body}`);
      }
    }
    assert.deepEqual(bad, [], `want 400 -32600 "Invalid Request" for each`);
  });
  test("initialize with a session id → 400 -32600", async () => {
    const res = await send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    rpcError(res, 400, -32600);
  });
  test("initialize inside a batch → 400 -32600", async () => {
    const res = await post(srv, [{ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } } }], { bearer: alice });
    rpcError(res, 400, -32600);
  });
  test("non-initialize POST without session id → 400 -32000 (exact message)", async () => {
    for (const protocolVersion of [undefined, "2025-06-18"]) {
      const res = await post(srv, rpc("tools/list"), { bearer: alice, protocolVersion });
      rpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
    }
  });
  test("notifications only → 202, empty body", async () => {
    const res = await send(note("notifications/cancelled", { requestId: 424242, reason: "test" }));
    assert.equal(res.status, 202, res.body);
    assert.equal(res.body, "");
  });
  test("responses only → 202, empty body", async () => {
    const res = await send({ jsonrpc: "2.0", id: "server-req-1", result: {} });
    assert.equal(res.status, 202, res.body);
    assert.equal(res.body, "");
  });
  test("request with a non-streaming handler → 200 application/json", async () => {
    const res = await send(rpc("tools/list", {}, 5));
    assert.equal(res.status, 200, res.body);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    assert.ok(responseTo(res, 5)?.result?.tools, res.body);
  });
  test("tools/call streams when the client accepts SSE → 200 text/event-stream", async () => {
    const res = await send(rpc("tools/call", { name: "execute", arguments: { code: "return 1;" } }, 6));
    assert.equal(res.status, 200, res.body);
    assert.match(String(res.headers["content-type"]), /^text\/event-stream/);
    assert.equal(responseTo(res, 6)?.result?.content?.[0]?.text, "1", res.body);
  });
  test("tools/call with accept application/json only → 200 application/json", async () => {
    const res = await send(rpc("tools/call", { name: "execute", arguments: { code: "return 1;" } }, 8), { accept: "application/json" });
    assert.equal(res.status, 200, res.body);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    assert.equal(responseTo(res, 8)?.result?.content?.[0]?.text, "1", res.body);
  });
  test("mcp-protocol-version header: unsupported → 400, absent → negotiated", async () => {
    for (const v of ["1999-01-01", "2024-11-05", "banana"]) {
      const res = await send(rpc("tools/list"), { protocolVersion: v });
      assert.equal(res.status, 400, `${v}: ${res.body}`);
    }
    const st = await openGet(srv, { bearer: alice, sessionId: s.sessionId, protocolVersion: "1999-01-01" });
    const body = await drain(st);
    assert.equal(st.status, 400, `GET with bad version: ${body}`);
    const ok = await send(rpc("tools/list", {}, 11), { protocolVersion: null });
    assert.equal(ok.status, 200, ok.body);
    assert.ok(responseTo(ok, 11)?.result, ok.body);
  });
});

describe("GET transport checks", () => {
  test("GET without text/event-stream in accept → 406", async () => {
    const s = await initSession(srv, alice);
    const st = await openGet(srv, { bearer: alice, sessionId: s.sessionId, protocolVersion: s.protocolVersion, accept: "application/json" });
    const body = await drain(st);
    assert.equal(st.status, 406, body);
  });
  test("GET without session id → 400", async () => {
    const st = await openGet(srv, { bearer: alice });
    const body = await drain(st);
    assert.equal(st.status, 400, body);
  });
});

describe("batches", () => {
  test("accepted on a 2025-03-26 session: every request answered", async () => {
    const s = await initSession(srv, alice, "2025-03-26");
    assert.equal(s.protocolVersion, "2025-03-26");
    const res = await post(srv, [rpc("ping", undefined, 21), rpc("tools/list", {}, 22), note("notifications/cancelled", { requestId: 1 })], {
      bearer: alice, sessionId: s.sessionId, protocolVersion: s.protocolVersion,
    });
    assert.equal(res.status, 200, res.body);
    const msgs = messagesOf(res);
    assert.deepEqual(msgs.find((m) => m.id === 21)?.result, {}, res.body);
    assert.ok(msgs.find((m) => m.id === 22)?.result?.tools, res.body);
  });
  test("a 2025-03-26 batch of notifications only → 202", async () => {
    const s = await initSession(srv, alice, "2025-03-26");
    const res = await post(srv, [note("notifications/cancelled", { requestId: 1 }), note("notifications/cancelled", { requestId: 2 })], {
      bearer: alice, sessionId: s.sessionId, protocolVersion: s.protocolVersion,
    });
    assert.equal(res.status, 202, res.body);
    assert.equal(res.body, "");
  });
  test("bad batch element / empty batch → 400 -32600", async () => {
    const s = await initSession(srv, alice, "2025-03-26");
    for (const body of [JSON.stringify([rpc("ping", undefined, 1), { foo: 1 }]), JSON.stringify([rpc("ping", undefined, 1), 42]), "[]"]) {
      const res = await post(srv, body, { bearer: alice, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
      rpcError(res, 400, -32600);
    }
  });
  test("initialize inside a 2025-03-26 session batch → 400 -32600", async () => {
    const s = await initSession(srv, alice, "2025-03-26");
    const res = await post(srv, [rpc("initialize", { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } }, 1)], {
      bearer: alice, sessionId: s.sessionId, protocolVersion: s.protocolVersion,
    });
    rpcError(res, 400, -32600);
  });
  for (const v of ["2025-06-18", "2025-11-25"]) {
    test(`rejected on a ${v} session → 400 -32600`, async () => {
      const s = await initSession(srv, alice, v);
      assert.equal(s.protocolVersion, v);
      const res = await post(srv, [rpc("ping", undefined, 1), rpc("tools/list", {}, 2)], { bearer: alice, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
      rpcError(res, 400, -32600);
    });
  }
});
