// SPEC §2 "Protocol version 2026-07-28 removed sessions": server/discover, each
// request authenticated and answered on its own, no mcp-session-id. Driven by
// @modelcontextprotocol/client 2.x (the SDK that negotiates 2026-07-28) and raw.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { fileURLToPath } from "node:url";
import { startServer, post, rpc, responseTo, clientInfo, drain, mcpHeaders, openStream, sleep, SESSIONLESS_VERSION, SESSION_VERSIONS, EXECUTE_ONE } from "./harness.mjs";

const PETSTORE = fileURLToPath(new URL("./fixtures/petstore.yaml", import.meta.url));
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

  test("methods 2026-07-28 removed, and unknown ones: 404, -32601, with the request's id", async () => {
    for (const [i, method] of ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "unknown/method"].entries()) {
      const res = await send2026(method, {}, 500 + i);
      assert.equal(res.status, 404, `${method}: ${res.body}`);
      assert.equal(res.json.id, 500 + i, res.body);
      assert.equal(res.json.error.code, -32601, res.body);
    }
  });

  test("_meta must name the version and the client's capabilities: 400, -32602, with the id", async () => {
    const cases = [
      {},
      { _meta: { "io.modelcontextprotocol/clientCapabilities": {} } },
      { _meta: { "io.modelcontextprotocol/protocolVersion": SESSIONLESS_VERSION } },
    ];
    for (const [i, params] of cases.entries()) {
      const res = await post(srv, rpc("server/discover", params, 110 + i), {
        bearer, protocolVersion: SESSIONLESS_VERSION, extra: { "mcp-method": "server/discover" },
      });
      assert.equal(res.status, 400, res.body);
      assert.deepEqual([res.json.id, res.json.error.code], [110 + i, -32602], res.body);
    }
  });

  test("the headers repeat the body: missing, malformed or different → 400, -32020, with the id", async () => {
    const call = rpc("tools/call", { ...EXECUTE_ONE, _meta: META }, 120);
    const send = (extra, protocolVersion = SESSIONLESS_VERSION) => post(srv, call, { bearer, protocolVersion, extra });
    for (const extra of [
      { "mcp-name": "execute" }, // no Mcp-Method
      { "mcp-method": "tools/list", "mcp-name": "execute" },
      { "mcp-method": "tools/call" }, // no Mcp-Name
      { "mcp-method": "tools/call", "mcp-name": "skills" },
      { "mcp-method": "tools/call", "mcp-name": "=?base64?ZXhlY3V0ZQ?=" }, // bad padding
    ]) {
      const res = await send(extra);
      assert.equal(res.status, 400, `${JSON.stringify(extra)}: ${res.body}`);
      assert.deepEqual([res.json.id, res.json.error.code], [120, -32020], res.body);
    }
    const noVersion = await post(srv, call, { bearer, extra: { "mcp-method": "tools/call", "mcp-name": "execute" } });
    assert.deepEqual([noVersion.status, noVersion.json?.error?.code], [400, -32020], noVersion.body);
    // A name sent as Base64 is read as its text.
    const encoded = await send({ "mcp-method": "tools/call", "mcp-name": `=?base64?${Buffer.from("execute").toString("base64")}?=` });
    assert.equal(encoded.status, 200, encoded.body);
    assert.equal(responseTo(encoded, 120)?.result?.structuredContent?.result, 1, encoded.body);
  });

  test("an unsupported version: 400, -32022, naming the versions served and the one asked", async () => {
    const meta = { ...META, "io.modelcontextprotocol/protocolVersion": "v999.0.0" };
    const res = await post(srv, rpc("server/discover", { _meta: meta }, 301), {
      bearer, protocolVersion: "v999.0.0", extra: { "mcp-method": "server/discover" },
    });
    assert.equal(res.status, 400, res.body);
    assert.equal(res.json.id, 301);
    assert.equal(res.json.error.code, -32022);
    assert.equal(res.json.error.data.requested, "v999.0.0");
    assert.deepEqual(res.json.error.data.supported, [SESSIONLESS_VERSION, ...SESSION_VERSIONS]);
    // The header and the body disagree: a mismatch.
    const mixed = await post(srv, rpc("server/discover", { _meta: meta }, 302), {
      bearer, protocolVersion: SESSIONLESS_VERSION, extra: { "mcp-method": "server/discover" },
    });
    assert.deepEqual([mixed.status, mixed.json.id, mixed.json.error.code], [400, 302, -32020], mixed.body);
  });

  test("subscriptions/listen: acknowledged first, every message tagged, tools/list_changed when the CLI adds an integration", async () => {
    const listen = (id, notifications) =>
      openStream(srv.mcpUrl, {
        method: "POST",
        headers: {
          ...mcpHeaders({ bearer, protocolVersion: SESSIONLESS_VERSION }),
          "content-type": "application/json",
          "mcp-method": "subscriptions/listen",
        },
        body: rpc("subscriptions/listen", { _meta: META, notifications }, id),
      });
    const tools = await listen("tools-1", { toolsListChanged: true, promptsListChanged: true });
    const prompts = await listen("prompts-1", { promptsListChanged: true });
    try {
      assert.equal(tools.status, 200);
      assert.match(tools.headers["content-type"], /text\/event-stream/);
      const data = (st) => st.events.filter((e) => e.data).map((e) => JSON.parse(e.data));
      const ack = await tools.waitFor(() => data(tools)[0]);
      assert.equal(ack.method, "notifications/subscriptions/acknowledged");
      assert.deepEqual(ack.params.notifications, { toolsListChanged: true }, "only what the server has is honoured");
      assert.equal(ack.params._meta["io.modelcontextprotocol/subscriptionId"], "tools-1");
      const promptsAck = await prompts.waitFor(() => data(prompts)[0]);
      assert.deepEqual(promptsAck.params.notifications, {});

      srv.cli(["integrations", "add", "openapi", "--spec", PETSTORE, "--namespace", "pets", "--base-url", "http://127.0.0.1:9", "--data-dir", srv.dataDir]);
      const changed = await tools.waitFor(() => data(tools).find((m) => m.method === "notifications/tools/list_changed"), 15_000);
      assert.equal(changed.params._meta["io.modelcontextprotocol/subscriptionId"], "tools-1");
      // The list it points to names the new integration.
      const list = await send2026("tools/list", {}, 130);
      assert.match(JSON.stringify(responseTo(list, 130).result.tools), /pets/);
      await sleep(500);
      assert.ok(!data(prompts).some((m) => m.method === "notifications/tools/list_changed"), "a stream that did not ask gets no tool notification");

      // Bounded per (account, org): the GET streams' bound, 8 by default.
      const more = [];
      for (let i = 0; i < 6; i++) more.push(await listen(`more-${i}`, { toolsListChanged: true }));
      try {
        const over = await listen("over", { toolsListChanged: true });
        await drain(over);
        assert.equal(over.status, 429, over.text);
      } finally {
        for (const st of more) st.close();
      }
    } finally {
      tools.close();
      prompts.close();
    }
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
