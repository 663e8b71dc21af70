// SPEC §2 "Protocol version 2026-07-28 removed sessions": server/discover, each
// request authenticated and answered on its own, no mcp-session-id. Driven by
// @modelcontextprotocol/client 2.x (the SDK that negotiates 2026-07-28) and raw.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { startServer, post, rpc, responseTo, clientInfo, SESSIONLESS_VERSION, SESSION_VERSIONS, EXECUTE_ONE } from "./harness.mjs";

let srv, bearer;
before(async () => {
  srv = await startServer();
  bearer = srv.mint("sessionless@example.com");
});
after(async () => {
  await srv?.cleanup();
});

const connect2 = async (versionNegotiation, token = bearer) => {
  const client = new Client({ name: "executor-e2e-v2", version: "0.0.1" }, { capabilities: {}, ...(versionNegotiation ? { versionNegotiation } : {}) });
  const transport = new StreamableHTTPClientTransport(new URL(srv.mcpUrl), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return { client, transport };
};

const META = {
  "io.modelcontextprotocol/protocolVersion": SESSIONLESS_VERSION,
  "io.modelcontextprotocol/clientInfo": clientInfo,
  "io.modelcontextprotocol/clientCapabilities": {},
};
/** A raw 2026-07-28 request: envelope in _meta plus the per-request headers, no session id. */
const send2026 = (method, params, id, { token = bearer, name, accept } = {}) =>
  post(srv, rpc(method, { ...(params ?? {}), _meta: META }, id), {
    bearer: token,
    protocolVersion: SESSIONLESS_VERSION,
    accept,
    extra: { "mcp-method": method, ...(name ? { "mcp-name": name } : {}) },
  });

describe("@modelcontextprotocol/client 2.x", () => {
  test("pinned 2026-07-28: connects sessionless, lists tools, calls execute", { timeout: 30_000 }, async () => {
    const { client, transport } = await connect2({ mode: { pin: SESSIONLESS_VERSION } });
    try {
      assert.equal(client.getProtocolEra(), "modern");
      assert.equal(client.getNegotiatedProtocolVersion(), SESSIONLESS_VERSION);
      assert.equal(transport.sessionId, undefined, "no session on 2026-07-28");
      const d = client.getDiscoverResult();
      for (const v of [SESSIONLESS_VERSION, ...SESSION_VERSIONS]) assert.ok(d.supportedVersions.includes(v), `supportedVersions lacks ${v}: ${d.supportedVersions}`);
      assert.ok(d.capabilities.tools, JSON.stringify(d.capabilities));
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), ["execute", "resume", "skills"]);
      const r = await client.callTool(EXECUTE_ONE);
      assert.deepEqual(r.content, [{ type: "text", text: "1" }], JSON.stringify(r));
      assert.deepEqual(r.structuredContent, { status: "completed", result: 1, logs: [] });
      assert.ok(!r.isError);
      const r2 = await client.callTool({ name: "execute", arguments: { code: "return 6 * 7;" } });
      assert.equal(r2.content[0].text, "42");
    } finally {
      await client.close();
    }
  });

  test("auto negotiation picks the sessionless revision", { timeout: 30_000 }, async () => {
    const { client, transport } = await connect2({ mode: "auto" });
    try {
      assert.equal(client.getProtocolEra(), "modern");
      assert.equal(client.getNegotiatedProtocolVersion(), SESSIONLESS_VERSION);
      assert.equal(transport.sessionId, undefined);
      const r = await client.callTool(EXECUTE_ONE);
      assert.equal(r.content[0].text, "1");
    } finally {
      await client.close();
    }
  });

  test("legacy mode of the 2.x client still gets a session", { timeout: 30_000 }, async () => {
    const { client, transport } = await connect2(undefined);
    try {
      assert.equal(client.getProtocolEra(), "legacy");
      assert.ok(SESSION_VERSIONS.includes(client.getNegotiatedProtocolVersion()), client.getNegotiatedProtocolVersion());
      assert.ok(transport.sessionId, "a session id on the legacy handshake");
      const r = await client.callTool(EXECUTE_ONE);
      assert.equal(r.content[0].text, "1");
    } finally {
      await client.close();
    }
  });

  test("pinned client with a bad bearer fails to connect", { timeout: 30_000 }, async () => {
    await assert.rejects(connect2({ mode: { pin: SESSIONLESS_VERSION } }, "bogus-token"));
  });
});

describe("raw 2026-07-28 requests without a session id", () => {
  test("server/discover → supported versions and capabilities, no session", async () => {
    const res = await send2026("server/discover", {}, 1);
    assert.equal(res.status, 200, res.body);
    assert.equal(res.headers["mcp-session-id"], undefined, "no mcp-session-id on 2026-07-28");
    const r = responseTo(res, 1)?.result;
    assert.ok(r, res.body);
    for (const v of [SESSIONLESS_VERSION, ...SESSION_VERSIONS]) assert.ok(r.supportedVersions?.includes(v), `supportedVersions lacks ${v}: ${res.body}`);
    assert.equal(r.capabilities?.tools?.listChanged, true, res.body);
    assert.ok(r.capabilities?.logging, res.body);
  });

  test("tools/list and tools/call are answered on their own", async () => {
    const list = await send2026("tools/list", {}, 2);
    assert.equal(list.status, 200, list.body);
    assert.equal(list.headers["mcp-session-id"], undefined);
    const tools = responseTo(list, 2)?.result?.tools;
    assert.ok(tools?.some((t) => t.name === "execute"), list.body);
    const call = await send2026("tools/call", { name: "execute", arguments: { code: "return 1;" } }, 3, { name: "execute" });
    assert.equal(call.status, 200, call.body);
    assert.equal(call.headers["mcp-session-id"], undefined);
    const r = responseTo(call, 3)?.result;
    assert.ok(r, call.body);
    assert.deepEqual(r.content, [{ type: "text", text: "1" }]);
    assert.deepEqual(r.structuredContent, { status: "completed", result: 1, logs: [] });
    assert.equal(r.resultType, "complete", `2026-07-28 results carry resultType: ${call.body}`);
  });

  test("tools/call with accept application/json only → JSON answer", async () => {
    const call = await send2026("tools/call", { name: "execute", arguments: { code: "return 2;" } }, 4, { name: "execute", accept: "application/json" });
    assert.equal(call.status, 200, call.body);
    assert.match(String(call.headers["content-type"]), /^application\/json/);
    assert.equal(responseTo(call, 4)?.result?.content?.[0]?.text, "2", call.body);
  });

  test("ping is answered", async () => {
    const res = await send2026("ping", {}, 5);
    assert.equal(res.status, 200, res.body);
    assert.ok(responseTo(res, 5)?.result, res.body);
  });

  test("each request is authenticated: none / bad / revoked bearer → 401", async () => {
    const none = await post(srv, rpc("tools/list", { _meta: META }, 6), { protocolVersion: SESSIONLESS_VERSION, extra: { "mcp-method": "tools/list" } });
    assert.equal(none.status, 401, none.body);
    assert.deepEqual(none.json, { jsonrpc: "2.0", error: { code: -32001, message: "Unauthorized" }, id: null });
    const bad = await send2026("tools/list", {}, 7, { token: "bogus" });
    assert.equal(bad.status, 401, bad.body);
    assert.ok(String(bad.headers["www-authenticate"]).includes('error="invalid_token"'), bad.headers["www-authenticate"]);
    const t = srv.mint("sessionless-revoke@example.com");
    const ok = await send2026("tools/list", {}, 8, { token: t });
    assert.equal(ok.status, 200, ok.body);
    srv.revoke(t);
    const revoked = await send2026("tools/list", {}, 9, { token: t });
    assert.equal(revoked.status, 401, revoked.body);
  });

  test("concurrent requests reusing one id each get their own answer", async () => {
    const N = 5;
    const all = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        send2026("tools/call", { name: "execute", arguments: { code: `await new Promise((r) => setTimeout(r, ${(N - i) * 40})); return ${i};` } }, 99, { name: "execute" }),
      ),
    );
    all.forEach((res, i) => {
      assert.equal(res.status, 200, res.body);
      assert.equal(responseTo(res, 99)?.result?.content?.[0]?.text, String(i), res.body);
    });
  });
});
