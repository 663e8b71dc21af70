// SPEC §13, issue 37: a full setup through the management API alone —
// upload an OpenAPI document, set its credential, add a policy, run code,
// decide the paused call, read the execution — and the API's conventions:
// problem+json errors naming the field, 201 + Location, an idempotent PUT,
// cursors, secrets never in a response, another org's ids answering 404.
// Parity: what the API changes the CLI sees at once, and the reverse.
// Sessions: a live session ended through the API is over at once, on the
// node that holds it too.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { startServer, recordingUpstream, connectSdk, post, rpc, openGet, drain, waitUntil, BIN, EXECUTE_ONE, NEWEST_SESSION_VERSION } from "./harness.mjs";

const SECRET = "api-SECRET-bearer-0123456789abcdef";

const spec = {
  openapi: "3.0.3",
  info: { title: "shop", version: "1" },
  servers: [{ url: "/v1" }],
  components: { securitySchemes: { main: { type: "http", scheme: "bearer" } } },
  security: [{ main: [] }],
  paths: {
    "/orders": {
      get: { operationId: "listOrders", tags: ["orders"], responses: { 200: { description: "ok" } } },
      post: {
        operationId: "createOrder",
        tags: ["orders"],
        requestBody: { content: { "application/json": { schema: { type: "object", properties: { item: { type: "string" } } } } } },
        responses: { 200: { description: "ok" } },
      },
    },
  },
};

let srv;
let upstream;
let alice;
let bob;

before(async () => {
  upstream = await recordingUpstream(({ method, url, headers, body }, res) => {
    res.end(JSON.stringify({ method, url, authorized: headers.authorization === `Bearer ${SECRET}`, body: body ? JSON.parse(body) : null }));
  });
  srv = await startServer({ args: ["--allow-local-network"] });
  alice = srv.mint("alice@api.test");
  bob = srv.mint("bob@api.test");
});
after(async () => {
  await srv?.cleanup();
  upstream?.close();
});

/** One API call: status, headers and the parsed body. */
const api = async (token, method, path, body) => {
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${srv.base}/api/v1${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch {}
  return { status: res.status, headers: res.headers, json, text };
};
const cli = (...args) => srv.cli([...args, "--data-dir", srv.dataDir]);

test("api: a full setup — upload a document, set its credential, add a policy, run, decide, read the record", async () => {
  const added = await api(alice, "POST", "/integrations", {
    kind: "openapi",
    namespace: "shop",
    spec: { document: JSON.stringify(spec) },
    baseUrl: `${upstream.base}/v1`,
  });
  assert.equal(added.status, 201, added.text);
  assert.equal(added.headers.get("location"), "/api/v1/integrations/shop");
  assert.equal(added.json.integration.toolCount, 2);

  const set = await api(alice, "PUT", "/integrations/shop/connection", { type: "bearer", value: SECRET });
  assert.equal(set.status, 200, set.text);
  assert.equal(set.json.kind, "bearer");
  assert.ok(!set.text.includes(SECRET), "the secret came back");
  // Idempotent: the same PUT again is the same state.
  const again = await api(alice, "PUT", "/integrations/shop/connection", { type: "bearer", value: SECRET });
  assert.equal(again.status, 200);
  assert.equal(again.json.stored, "sealed");

  const policy = await api(alice, "POST", "/policies", { pattern: "shop.orders.createOrder", action: "require_approval" });
  assert.equal(policy.status, 201, policy.text);
  assert.match(policy.headers.get("location"), /^\/api\/v1\/policies\/pol_/);
  const evaluated = await api(alice, "POST", "/policies/evaluate", { path: "shop.orders.createOrder" });
  assert.equal(evaluated.json.action, "require_approval");
  assert.equal(evaluated.json.rule.id, policy.json.id);
  assert.equal(evaluated.json.toolExists, true);

  const listed = await api(alice, "POST", "/executions", { code: "return await tools.shop.orders.listOrders({})" });
  assert.equal(listed.status, 200, listed.text);
  assert.equal(listed.json.isError, false, listed.text);
  assert.equal(listed.json.structured.result.data.authorized, true, "the upstream got the credential");
  assert.ok(!listed.text.includes(SECRET));

  const paused = await api(alice, "POST", "/executions", { code: "return await tools.shop.orders.createOrder({ body: { item: 'tea' } })" });
  assert.equal(paused.status, 200, paused.text);
  const id = paused.json.pausedExecutionId;
  assert.match(id ?? "", /^exec_/, paused.text);
  assert.equal(upstream.seen.filter((r) => r.method === "POST").length, 0, "nothing was sent before the decision");

  const pending = await api(alice, "GET", "/approvals");
  assert.equal(pending.status, 200, pending.text);
  const waiting = pending.json.find((p) => p.executionId === id);
  assert.ok(waiting, `the paused call is pending: ${pending.text}`);
  assert.equal(waiting.toolPath, "shop.orders.createOrder");
  assert.match(waiting.argsPreview, /tea/);
  assert.equal(waiting.policyRule, policy.json.id);
  assert.equal((await api(bob, "GET", "/approvals")).json.length, 0, "bob sees none of alice's approvals");

  const decided = await api(alice, "POST", `/approvals/${id}`, { action: "accept" });
  assert.equal(decided.status, 200, decided.text);
  assert.equal(decided.json.isError, false, decided.text);
  assert.deepEqual(upstream.seen.filter((r) => r.method === "POST").map((r) => JSON.parse(r.body)), [{ item: "tea" }]);

  const twice = await api(alice, "POST", `/executions/${id}/resume`, { action: "accept" });
  assert.equal(twice.status, 409, `deciding twice says so: ${twice.text}`);
  assert.match(twice.json.detail, /finished|decided/);

  const record = await api(alice, "GET", `/executions/${id}`);
  assert.equal(record.status, 200, record.text);
  assert.equal(record.json.status, "completed");
  assert.match(record.json.code, /createOrder/);
  const [call] = record.json.toolCalls;
  assert.equal(call.toolPath, "shop.orders.createOrder");
  assert.equal(call.outcome, "ok");
  assert.equal(call.approval, "approved");
  assert.equal(call.policyAction, "require_approval");
  assert.equal(call.policyRule, policy.json.id);
  assert.deepEqual(call.argNames, ["body"]);
  assert.ok(call.approvalWaitMs >= 0 && call.durationMs >= 0);

  // The audit trail: filters by tool, outcome and execution; values never.
  const trail = await api(alice, "GET", `/tool-calls?execution=${id}`);
  assert.equal(trail.status, 200, trail.text);
  assert.deepEqual(trail.json.items.map((c) => c.toolPath), ["shop.orders.createOrder"]);
  assert.ok(!trail.text.includes("tea"), "an argument's value is in the audit trail");
  const byTool = await api(alice, "GET", "/tool-calls?tool=shop.&outcome=ok");
  assert.ok(byTool.json.items.length >= 2, byTool.text);
  assert.ok(byTool.json.items.every((c) => c.toolPath.startsWith("shop.") && c.outcome === "ok"));
  const blockedRule = await api(alice, "POST", "/policies", { pattern: "shop.orders.listOrders", action: "block", position: 0 });
  await api(alice, "POST", "/executions", { code: "return await tools.shop.orders.listOrders({})" });
  const blocked = await api(alice, "GET", "/tool-calls?outcome=blocked");
  assert.equal(blocked.json.items[0]?.policyRule, blockedRule.json.id, blocked.text);
  assert.equal((await api(bob, "GET", "/tool-calls")).json.items.length, 0, "bob sees none of alice's calls");
  const page = await api(alice, "GET", "/executions?limit=10");
  assert.ok(page.json.items.some((x) => x.id === id), "the execution is listed");
  // Cursors walk the executions newest first, each once.
  const walked = [];
  let cursor = null;
  do {
    const r = await api(alice, "GET", `/executions?limit=1${cursor ? `&cursor=${cursor}` : ""}`);
    walked.push(...r.json.items.map((x) => x.id));
    cursor = r.json.next_cursor;
  } while (cursor);
  assert.equal(new Set(walked).size, walked.length);
  assert.ok(walked.includes(id));
  const completed = await api(alice, "GET", "/executions?status=completed");
  assert.ok(completed.json.items.every((x) => x.status === "completed"));
});

test("api: tools/call is the operator's own call — an approval-gated tool runs at once, approved by the caller; block still applies", async () => {
  // After the full setup: shop.orders.createOrder needs approval, listOrders is blocked.
  const before = upstream.seen.filter((r) => r.method === "POST").length;
  const called = await api(alice, "POST", "/tools/call", { path: "shop.orders.createOrder", input: { body: { item: "scone" } } });
  assert.equal(called.status, 200, called.text);
  assert.equal(called.json.isError, false, called.text);
  assert.equal(called.json.pausedExecutionId ?? null, null, "it did not pause");
  assert.equal(upstream.seen.filter((r) => r.method === "POST").length, before + 1, "the upstream got the call");
  const me = (await api(alice, "GET", "/me")).json;
  assert.ok(me.orgs.some((o) => o.id === me.orgId && o.name === me.orgName), JSON.stringify(me));
  const [call] = (await api(alice, "GET", "/tool-calls?tool=shop.orders.createOrder&limit=1")).json.items;
  assert.equal(call.approval, "approved");
  assert.equal(call.decidedBy, me.accountId, "the caller approved it by calling");
  assert.equal(call.approvalWaitMs, 0);
  const blocked = await api(alice, "POST", "/tools/call", { path: "shop.orders.listOrders", input: {} });
  assert.equal(blocked.status, 200, blocked.text);
  assert.match(blocked.text, /tool_blocked/);
});

/** An SSE reader over fetch: `next()` resolves with the next event's {event, data}. */
const openEvents = async (token, path) => {
  const controller = new AbortController();
  const res = await fetch(`${srv.base}/api/v1${path}`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  const reader = res.body?.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const next = async (ms = 10_000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      const end = buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const lines = block.split("\n");
        const event = lines.find((l) => l.startsWith("event:"))?.slice(6).trim();
        const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (event) return { event, data };
        continue; // a keep-alive comment
      }
      if (Date.now() > deadline) throw new Error(`no event within ${ms} ms`);
      const { value, done } = await reader.read();
      if (done) return null;
      buffer += decoder.decode(value, { stream: true });
    }
  };
  return { res, next, close: () => controller.abort() };
};

test("api: the approvals stream sends the waiting list at once and again as calls pause and are decided", async () => {
  const stream = await openEvents(alice, "/approvals/stream");
  assert.equal(stream.res.status, 200);
  assert.match(stream.res.headers.get("content-type"), /text\/event-stream/);
  try {
    const first = await stream.next();
    assert.equal(first.event, "pending");
    const before = JSON.parse(first.data);
    assert.ok(Array.isArray(before));
    const paused = await api(alice, "POST", "/executions", { code: "return await tools.shop.orders.createOrder({ body: { item: 'cocoa' } })" });
    const id = paused.json.pausedExecutionId;
    assert.match(id ?? "", /^exec_/, paused.text);
    const waiting = JSON.parse((await stream.next()).data);
    const entry = waiting.find((p) => p.executionId === id);
    assert.ok(entry, `the paused call appears: ${JSON.stringify(waiting)}`);
    assert.equal(entry.toolPath, "shop.orders.createOrder");
    assert.equal((await api(alice, "POST", `/approvals/${id}`, { action: "decline" })).status, 200);
    const after = JSON.parse((await stream.next()).data);
    assert.ok(!after.some((p) => p.executionId === id), "the decided call leaves the list");
  } finally {
    stream.close();
  }
  // Bob's stream never shows alice's calls; no token gets 401.
  const bobs = await openEvents(bob, "/approvals/stream");
  assert.deepEqual(JSON.parse((await bobs.next()).data), []);
  bobs.close();
  assert.equal((await fetch(`${srv.base}/api/v1/approvals/stream`)).status, 401);
});

test("api: a token holds at most 8 open streams; a 9th gets 429, and a closed one frees its place", async () => {
  const token = srv.mint("streams@api.test");
  const open = [];
  for (let i = 0; i < 8; i++) {
    const s = await openEvents(token, "/approvals/stream");
    assert.equal(s.res.status, 200);
    await s.next();
    open.push(s);
  }
  const ninth = await fetch(`${srv.base}/api/v1/approvals/stream`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(ninth.status, 429);
  assert.equal((await ninth.json()).code, "too_many_streams");
  open.pop().close();
  await waitUntil("a closed stream frees its place", async () => {
    const again = await fetch(`${srv.base}/api/v1/approvals/stream`, { headers: { authorization: `Bearer ${token}` } });
    if (again.status === 200) { await again.body?.cancel(); return true; }
    await again.text();
    return false;
  }, { ms: 10_000 });
  for (const s of open) s.close();
});

test("api: errors are problems naming the field; no token gets 401 with how to get one", async () => {
  const bad = await api(alice, "POST", "/policies", { pattern: "shop.*", acton: "block" });
  assert.equal(bad.status, 422);
  assert.equal(bad.headers.get("content-type"), "application/problem+json");
  assert.equal(bad.json.code, "invalid_input");
  assert.equal(bad.json.field, "acton");
  const badAction = await api(alice, "POST", "/policies", { pattern: "shop.*", action: "maybe" });
  assert.equal(badAction.json.field, "action");
  const badNamespace = await api(alice, "POST", "/integrations", { kind: "openapi", namespace: "9lives", spec: { document: "{}" } });
  assert.equal(badNamespace.status, 422);
  assert.equal(badNamespace.json.field, "namespace");
  const reserved = await api(alice, "POST", "/integrations", { kind: "openapi", namespace: "executor", spec: { document: "{}" } });
  assert.equal(reserved.status, 409, "a built-in name is taken");
  assert.equal(reserved.json.code, "namespace_reserved");
  const shortSecret = await api(alice, "PUT", "/integrations/shop/connection", { type: "bearer", value: "abc" });
  assert.equal(shortSecret.status, 422);
  assert.equal(shortSecret.json.field, "value");
  const none = await api(null, "GET", "/integrations");
  assert.equal(none.status, 401);
  assert.match(none.json.detail, /executor token create/);
  assert.match(none.headers.get("www-authenticate") ?? "", /^Bearer/);
  const notJson = await fetch(`${srv.base}/api/v1/policies`, { method: "POST", headers: { authorization: `Bearer ${alice}`, "content-type": "text/plain" }, body: "x" });
  assert.equal(notJson.status, 415);
});

test("api: the document and its page need no token; every route in it but those two does", async () => {
  const doc = await (await fetch(`${srv.base}/api/v1/openapi.json`)).json();
  assert.equal(doc.openapi, "3.1.0");
  const page = await fetch(`${srv.base}/api/docs`);
  assert.equal(page.status, 200);
  const html = await page.text();
  assert.match(html, /openapi\.json/);
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href="http/, "the page loads nothing from elsewhere");
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of Object.keys(item)) {
      const concrete = path.replace(/\{[^}]+\}/g, "x");
      const res = await fetch(`${srv.base}${concrete}`, { method: method.toUpperCase(), headers: { "content-type": "application/json" }, body: ["post", "put"].includes(method) ? "{}" : undefined });
      assert.equal(res.status, 401, `${method} ${path} answered ${res.status} without a token`);
    }
  }
});

test("api: lists page with cursors that walk every item once", async () => {
  const token = srv.mint("pager@api.test");
  for (let i = 0; i < 5; i++) {
    const r = await api(token, "POST", "/policies", { pattern: `ns${i}.*`, action: "allow" });
    assert.equal(r.status, 201, r.text);
  }
  const seen = [];
  let cursor = null;
  do {
    const r = await api(token, "GET", `/policies?limit=2${cursor ? `&cursor=${cursor}` : ""}`);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.items.length <= 2);
    seen.push(...r.json.items.map((p) => p.pattern));
    cursor = r.json.next_cursor;
  } while (cursor);
  assert.deepEqual(seen, ["ns0.*", "ns1.*", "ns2.*", "ns3.*", "ns4.*"]);
  const bad = await api(token, "GET", "/policies?cursor=zz");
  assert.equal(bad.status, 422);
  assert.equal(bad.json.field, "cursor");
  const tooMany = await api(token, "GET", "/policies?limit=100000");
  assert.equal(tooMany.status, 422);
  assert.equal(tooMany.json.field, "limit");
});

test("api: tenancy — another org's integrations, connections, policies, executions and tokens answer 404", async () => {
  const mine = await api(alice, "POST", "/integrations", { kind: "openapi", namespace: "private", spec: { document: JSON.stringify(spec) } });
  assert.equal(mine.status, 201, mine.text);
  await api(alice, "PUT", "/integrations/private/connection", { type: "apiKey", value: "private-key-123" });
  const rule = (await api(alice, "POST", "/policies", { pattern: "private.*", action: "block" })).json;
  const run = (await api(alice, "POST", "/executions", { code: "return 7" })).json;
  const exec = (await api(alice, "GET", "/executions?limit=1")).json.items[0];
  const token = (await api(alice, "POST", "/tokens", {})).json;
  assert.equal(run.isError, false);

  for (const [method, path] of [
    ["GET", "/integrations/private"],
    ["GET", "/integrations/private/tools"],
    ["POST", "/integrations/private/refresh"],
    ["DELETE", "/integrations/private"],
    ["GET", "/integrations/private/connection"],
    ["DELETE", "/integrations/private/connection"],
    ["GET", `/policies/${rule.id}`],
    ["DELETE", `/policies/${rule.id}`],
    ["GET", `/executions/${exec.id}`],
    ["GET", `/tokens/${token.id}`],
    ["POST", `/tokens/${token.id}/revoke`],
  ]) {
    const r = await api(bob, method, path);
    assert.equal(r.status, 404, `${method} ${path} answered bob ${r.status}: ${r.text}`);
  }
  for (const list of ["/integrations", "/connections", "/policies", "/executions", "/tool-calls", "/tokens", "/sessions"]) {
    const r = await api(bob, "GET", list);
    assert.ok(!r.text.includes("private") && !r.text.includes(rule.id) && !r.text.includes(exec.id), `${list} shows alice's rows to bob`);
  }
  // Alice's things are all still there, and her new token works.
  assert.equal((await api(alice, "GET", "/integrations/private")).status, 200);
  assert.equal((await api(alice, "GET", `/policies/${rule.id}`)).status, 200);
  assert.equal((await api(token.token, "GET", "/me")).json.orgId, (await api(alice, "GET", "/me")).json.orgId);
  assert.ok((await api(alice, "GET", "/tokens")).json.items.some((t) => t.id === token.id));
  assert.ok(!(await api(bob, "GET", "/tokens")).text.includes(token.id));
  assert.equal((await api(alice, "POST", `/tokens/${token.id}/revoke`)).status, 200);
  assert.equal((await api(alice, "GET", `/tokens/${token.id}`)).json.state, "revoked");
  assert.equal((await api(token.token, "GET", "/me")).status, 401, "a revoked token stops at once");
});

test("api: parity — what the API changes the CLI sees at once, and the reverse", async () => {
  const carol = srv.mint("carol@api.test");
  const org = (await api(carol, "GET", "/me")).json.orgName;
  const added = await api(carol, "POST", "/integrations", { kind: "openapi", namespace: "parity", spec: { document: JSON.stringify(spec) } });
  assert.equal(added.status, 201, added.text);
  assert.match(cli("integrations", "list", "--org", org), /^parity\topenapi\t2 tools/m);
  cli("policies", "add", "parity.*", "block", "--org", org);
  const rules = (await api(carol, "GET", "/policies")).json.items;
  assert.deepEqual(rules.map((r) => [r.pattern, r.action]), [["parity.*", "block"]]);
  await api(carol, "DELETE", `/policies/${rules[0].id}`);
  assert.equal(cli("policies", "list", "--org", org).trim(), "");
  cli("integrations", "remove", "parity", "--org", org);
  assert.equal((await api(carol, "GET", "/integrations/parity")).status, 404);
});

test("api: GET /tools/{path} answers the TypeScript agents read from tools.describe.tool, and the schemas", async () => {
  const erin = srv.mint("erin@api.test");
  const org = (await api(erin, "GET", "/me")).json.orgName;
  assert.equal((await api(erin, "POST", "/integrations", { kind: "openapi", namespace: "desc", spec: { document: JSON.stringify(spec) } })).status, 201);
  const path = "desc.orders.createOrder";
  const described = await api(erin, "GET", `/tools/${path}`);
  assert.equal(described.status, 200, described.text);
  const tool = described.json;
  assert.equal(tool.path, path);
  assert.equal(tool.requiresApproval, true, "a POST waits for approval by default");
  assert.match(tool.typeScript, /^type Input = /m, tool.typeScript);
  assert.match(tool.typeScript, /^type Output = \{ ok: true; data: .*\| \{ ok: false; error: ToolError \};$/m, tool.typeScript);
  assert.match(tool.typeScript, /^type ToolError = /m);
  assert.equal(tool.inputSchema.type, "object", described.text);
  // The same rendering the agent gets.
  const run = await api(erin, "POST", "/executions", { code: `return await tools.describe.tool({ path: "${path}" })` });
  assert.equal(run.json.isError, false, run.text);
  const agent = run.json.structured.result;
  assert.equal(tool.inputTypeScript, agent.inputTypeScript);
  assert.equal(tool.outputTypeScript, agent.outputTypeScript);
  assert.deepEqual(tool.typeScriptDefinitions, agent.typeScriptDefinitions);
  assert.equal(tool.description ?? null, agent.description ?? null);
  // The CLI prints the same TypeScript.
  const printed = cli("tools", "describe", path, "--org", org);
  assert.ok(printed.includes(tool.typeScript), printed);
  assert.match(cli("integrations", "tools", "desc", "--org", org), /^desc\.orders\.createOrder\tapproval\t/m);
  // Unknown here, and another org's, are not found.
  for (const [who, p] of [[erin, "desc.orders.nothing"], [bob, path], [erin, "nodots"]]) {
    const r = await api(who, "GET", `/tools/${p}`);
    assert.equal(r.status, 404, `${p}: ${r.text}`);
    assert.equal(r.json.code, "not_found");
  }
  // The static routes beside it still answer as before.
  assert.equal((await api(erin, "GET", "/tools/search?q=order")).status, 200);
});

test("api: DELETE /sessions/{id} ends a live session at once — its next request is 404, its GET stream ends; another org's token gets 404", async () => {
  const frank = srv.mint("frank@api.test");
  const org = (await api(frank, "GET", "/me")).json.orgName;
  const { client, transport, listening } = await connectSdk(srv, frank, { name: "ended-by-operator" });
  try {
    await listening();
    assert.equal((await client.callTool(EXECUTE_ONE)).isError ?? false, false);
    const sessionId = transport.sessionId;
    const protocolVersion = transport.protocolVersion;
    const get = await openGet(srv, { bearer: frank, sessionId, protocolVersion });
    assert.equal(get.status, 200);

    const listed = await api(frank, "GET", "/sessions");
    const mine = listed.json.items.find((s) => s.id === sessionId);
    assert.ok(mine, listed.text);
    assert.equal(mine.clientName, "ended-by-operator");
    assert.equal(mine.terminatedAtMs ?? null, null);
    assert.match(cli("sessions", "list", "--org", org), new RegExp(`^${sessionId}\tended-by-operator\t\\S+\t.*\topen$`, "m"));

    // Bob cannot end it, nor learn that it exists; it goes on working.
    const foreign = await api(bob, "DELETE", `/sessions/${sessionId}`);
    assert.equal(foreign.status, 404, foreign.text);
    assert.equal((await api(bob, "DELETE", "/sessions/no-such-session")).status, 404);
    assert.equal((await client.callTool(EXECUTE_ONE)).isError ?? false, false, "bob's DELETE ended it");

    const ended = await api(frank, "DELETE", `/sessions/${sessionId}`);
    assert.equal(ended.status, 204, ended.text);
    await waitUntil("the session's GET stream to end", () => get.ended, { ms: 5000 });
    const next = await post(srv, rpc("tools/list"), { bearer: frank, sessionId, protocolVersion });
    assert.equal(next.status, 404, next.body);
    assert.equal(next.json?.error?.message, "Session terminated, please reconnect", next.body);
    await assert.rejects(client.callTool(EXECUTE_ONE), "the SDK client's next call fails");

    const after = (await api(frank, "GET", "/sessions")).json.items.find((s) => s.id === sessionId);
    assert.ok(after.terminatedAtMs > 0, JSON.stringify(after));
    assert.match(cli("sessions", "list", "--org", org), new RegExp(`^${sessionId}\t.*\tterminated$`, "m"));
    assert.equal((await api(frank, "DELETE", `/sessions/${sessionId}`)).status, 204, "ending it again is no error");
  } finally {
    await client.close().catch(() => {});
  }
});

test(
  "api: a session held by one node, ended through another node's API or the CLI, is over on its holder at once (SQLite: within its look each second)",
  async () => {
    // On Postgres the second node shares the database; on SQLite the data dir.
    const peer = srv.pg
      ? await startServer({ store: "sqlite", env: srv.pg.env, args: ["--allow-local-network"] })
      : await startServer({ dataDir: srv.dataDir, args: ["--allow-local-network"] });
    try {
      const gina = srv.mint("gina@api.test");
      const { client, transport } = await connectSdk(srv, gina, { name: "held-by-the-first-node" });
      try {
        assert.equal((await client.callTool(EXECUTE_ONE)).isError ?? false, false);
        const sessionId = transport.sessionId;
        const protocolVersion = transport.protocolVersion;
        const get = await openGet(srv, { bearer: gina, sessionId, protocolVersion });
        assert.equal(get.status, 200);
        const res = await fetch(`${peer.base}/api/v1/sessions/${sessionId}`, { method: "DELETE", headers: { authorization: `Bearer ${gina}` } });
        assert.equal(res.status, 204, await res.text());
        await waitUntil("the holder's GET stream to end", () => get.ended, { ms: 5000 });
        const next = await post(srv, rpc("tools/list"), { bearer: gina, sessionId, protocolVersion });
        assert.equal(next.status, 404, next.body);
        assert.equal(next.json?.error?.message, "Session terminated, please reconnect", next.body);
      } finally {
        await client.close().catch(() => {});
      }
      // A CLI process serves no session: it ends the record and tells the nodes.
      const org = (await api(gina, "GET", "/me")).json.orgName;
      const second = await connectSdk(srv, gina, { name: "ended-from-a-shell" });
      try {
        const { sessionId, protocolVersion } = second.transport;
        const get = await openGet(srv, { bearer: gina, sessionId, protocolVersion });
        if (get.status !== 200) await drain(get);
        assert.equal(get.status, 200, get.text);
        cli("sessions", "terminate", sessionId, "--org", org);
        await waitUntil("the holder's GET stream to end", () => get.ended, { ms: 5000 });
        const next = await post(srv, rpc("tools/list"), { bearer: gina, sessionId, protocolVersion });
        assert.equal(next.status, 404, next.body);
      } finally {
        await second.client.close().catch(() => {});
      }
    } finally {
      await peer.cleanup();
    }
  },
);

test("api: the calls waiting for approval, listed and decided from the CLI", async () => {
  const hana = srv.mint("hana@api.test");
  const org = (await api(hana, "GET", "/me")).json.orgName;
  assert.equal((await api(hana, "POST", "/integrations", { kind: "openapi", namespace: "waits", spec: { document: JSON.stringify(spec) }, baseUrl: `${upstream.base}/v1` })).status, 201);
  assert.equal((await api(hana, "PUT", "/integrations/waits/connection", { type: "bearer", value: SECRET })).status, 200);
  const paused = await api(hana, "POST", "/executions", { code: "return await tools.waits.orders.createOrder({ body: { item: 'cli' } })" });
  const id = paused.json.pausedExecutionId;
  assert.match(id ?? "", /^exec_/, paused.text);
  assert.match(cli("approvals", "list", "--org", org), new RegExp(`^${id}\twaits\\.orders\\.createOrder\tpaused [^\t]+\texpires [^\t]+\t.*"item": "cli"`, "m"));
  // Not `cli`: the server calls the upstream this process serves, which a
  // synchronous child would keep from answering.
  const resumed = await promisify(execFile)(BIN, ["resume", id, "--action", "accept", "--data-dir", srv.dataDir], { env: srv.env });
  assert.match(resumed.stdout, /"item": ?"cli"/, resumed.stdout);
  assert.equal(cli("approvals", "list", "--org", org).trim(), "");
});

test("api: parity across two nodes on one store — a change through one node's API is visible through the other's at once", async () => {
  // On Postgres (pg-e2e) the second node shares the database; on SQLite
  // the data dir.
  const peer = srv.pg
    ? await startServer({ store: "sqlite", env: srv.pg.env, args: ["--allow-local-network"] })
    : await startServer({ dataDir: srv.dataDir, args: ["--allow-local-network"] });
  try {
    const dave = srv.mint("dave@api.test");
    const on = (node) => async (method, path, body) => {
      const res = await fetch(`${node.base}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${dave}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : null, text };
    };
    const [a, b] = [on(srv), on(peer)];
    assert.equal((await a("POST", "/integrations", { kind: "openapi", namespace: "twin", spec: { document: JSON.stringify(spec) } })).status, 201);
    assert.equal((await b("GET", "/integrations/twin")).json.toolCount, 2, "the other node sees the integration");
    const rule = await b("POST", "/policies", { pattern: "twin.*", action: "block" });
    assert.equal(rule.status, 201, rule.text);
    assert.equal((await a("POST", "/policies/evaluate", { path: "twin.orders.listOrders" })).json.action, "block");
    const run = await b("POST", "/executions", { code: "return await tools.twin.orders.listOrders({})" });
    const id = (await b("GET", "/executions?limit=1")).json.items[0].id;
    assert.equal((await a("GET", `/executions/${id}`)).json.status, "completed", run.text);
    const extra = (await a("POST", "/tokens", {})).json;
    assert.equal((await on(peer)("GET", "/me")).status, 200);
    assert.equal((await a("POST", `/tokens/${extra.id}/revoke`)).status, 200);
    const revoked = await fetch(`${peer.base}/api/v1/me`, { headers: { authorization: `Bearer ${extra.token}` } });
    assert.equal(revoked.status, 401, "a token revoked on one node is refused by the other at once");
    await b("DELETE", "/integrations/twin");
    assert.equal((await a("GET", "/integrations/twin")).status, 404);
  } finally {
    await peer.cleanup();
  }
});

test("api: a token past its rate gets 429 with Retry-After, and the same token's MCP requests still answer", async () => {
  const limited = await startServer({ args: ["--api-rate", "1", "--api-burst", "3"] });
  try {
    const token = limited.mint("rate@api.test");
    const statuses = [];
    let refused;
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${limited.base}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
      statuses.push(res.status);
      if (res.status === 429) refused = { retryAfter: res.headers.get("retry-after"), type: res.headers.get("content-type"), body: await res.json() };
      else await res.text();
    }
    assert.deepEqual(statuses.slice(0, 3), [200, 200, 200], "the burst is served");
    assert.ok(statuses.includes(429), `past the burst: ${statuses}`);
    assert.match(refused.type, /application\/problem\+json/);
    assert.ok(Number(refused.retryAfter) >= 1, `Retry-After: ${refused.retryAfter}`);
    assert.equal(refused.body.status, 429);
    // The API's bucket is the API's: the MCP endpoint answers the same token.
    const init = await post(limited, rpc("initialize", { protocolVersion: NEWEST_SESSION_VERSION, capabilities: {}, clientInfo: { name: "rate", version: "1" } }), { bearer: token });
    assert.equal(init.status, 200, init.text);
  } finally {
    await limited.cleanup();
  }
});
