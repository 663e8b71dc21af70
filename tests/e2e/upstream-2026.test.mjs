// SPEC §8: the upstream client with a server that speaks MCP 2026-07-28
// only (fixtures/mcp-2026-upstream.mjs, a real process that records what it
// receives): `server/discover` instead of `initialize`, `_meta` and the
// standard headers on every request, a tool's `x-mcp-header` argument
// mirrored into its header, a tool with an invalid header declaration left
// out, and the upstream's `input_required` answered through the approval
// path — the execution pauses with the upstream's question, the person
// decides, and the call is sent again with the answer and the upstream's
// `requestState` unchanged, under a new JSON-RPC id.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { startServer, connectSdk, runOk, waitUntil } from "./harness.mjs";

const FIXTURE = fileURLToPath(new URL("./fixtures/mcp-2026-upstream.mjs", import.meta.url));

let srv;
let bearer;
let client;
let upstream;
let upstreamBase;

before(async () => {
  upstream = spawn(process.execPath, [FIXTURE], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  upstream.stdout.on("data", (d) => (out += d));
  await waitUntil("the 2026-07-28 upstream listening", () => /listening \d+/.test(out));
  upstreamBase = `http://127.0.0.1:${out.match(/listening (\d+)/)[1]}`;
  srv = await startServer({ args: ["--allow-local-network"] });
  bearer = srv.mint("modern@example.com", "modern");
  cli("integrations", "add", "mcp", "--url", `${upstreamBase}/mcp`, "--allow-local-network", "--namespace", "modern");
  ({ client } = await connectSdk(srv, bearer));
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
  upstream?.kill("SIGKILL");
});

const cli = (...args) => srv.cli([...args, "--org", "modern", "--data-dir", srv.dataDir]);
const run = (code) => runOk(client, code, []);
const seen = async () => (await fetch(`${upstreamBase}/seen`)).json();
const calls = async (tool) => (await seen()).filter((r) => r.body.method === "tools/call" && r.body.params?.name === tool);

test("2026-07-28 upstream: discovered without a handshake, every request with _meta and the standard headers", async () => {
  const requests = await seen();
  const methods = requests.map((r) => r.body.method);
  assert.equal(methods[0], "server/discover", methods.join(", "));
  assert.ok(!methods.includes("initialize"), "no initialize was sent");
  assert.ok(methods.includes("tools/list"));
  for (const { headers, body } of requests) {
    const meta = body.params?._meta ?? {};
    assert.equal(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", JSON.stringify(body));
    assert.ok(meta["io.modelcontextprotocol/clientCapabilities"], "client capabilities in _meta");
    assert.equal(meta["io.modelcontextprotocol/clientInfo"]?.name, "executor");
    assert.equal(headers["mcp-protocol-version"], "2026-07-28");
    assert.equal(headers["mcp-method"], body.method);
  }
  // Form elicitation is declared: the upstream's questions have a way back.
  assert.deepEqual(requests[0].body.params._meta["io.modelcontextprotocol/clientCapabilities"].elicitation, { form: {} });
});

test("2026-07-28 upstream: a tool with an invalid x-mcp-header is left out, the others stay", async () => {
  const names = await run("return (await tools.search({ namespace: 'modern', limit: 20 })).items.map((i) => i.path).sort()");
  assert.deepEqual(names, ["modern.deploy", "modern.echo_region"]);
});

test("2026-07-28 upstream: a call names its tool in Mcp-Name and mirrors its x-mcp-header argument", async () => {
  const echoed = await run("return await tools.modern.echo_region({ region: 'eu-west 1', note: 'n' })");
  assert.equal(echoed.ok, true, JSON.stringify(echoed));
  assert.deepEqual(JSON.parse(echoed.data.content[0].text), { region: "eu-west 1", note: "n" });
  const [sent] = await calls("echo_region");
  assert.equal(sent.headers["mcp-name"], "echo_region");
  assert.equal(sent.headers["mcp-param-region"], "eu-west 1");
  assert.equal(sent.headers["mcp-param-note"], undefined, "an argument without a declaration stays in the body only");
});

test("2026-07-28 upstream: input_required pauses the execution with the upstream's question; accept answers it and echoes the state", async () => {
  const paused = await client.callTool({ name: "execute", arguments: { code: "return await tools.modern.deploy({ env: 'prod' })" } });
  assert.equal(paused.structuredContent?.status, "waiting_for_interaction", JSON.stringify(paused));
  assert.match(paused.content[0].text, /^Execution paused: Approve modern\.deploy\?\n\nThe integration asks: Deploy to prod\?/);
  assert.match(paused.structuredContent.interaction.message, /It asks: Deploy to prod\?/);
  assert.equal((await calls("deploy")).length, 1, "nothing is sent again before the decision");
  const done = await client.callTool({
    name: "resume",
    arguments: { executionId: paused.structuredContent.executionId, action: "accept" },
  });
  const result = done.structuredContent?.result;
  assert.equal(result?.ok, true, JSON.stringify(done));
  assert.deepEqual(result.data.structuredContent, {
    answer: { action: "accept", content: { confirmed: true } },
    stateKnown: true,
    sameId: false,
  });
  const detail = JSON.parse(srv.cli(["executions", "show", paused.structuredContent.executionId, "--data-dir", srv.dataDir]));
  // The question's decision is in the audit trail like any approval's.
  const [audited] = detail.toolCalls;
  assert.equal(audited.toolPath, "modern.deploy");
  assert.equal(audited.policyAction, "allow", "no policy asked: the upstream did");
  assert.equal(audited.approval, "approved", JSON.stringify(audited));
  assert.equal(audited.decidedVia, "resume");
  assert.match(audited.decidedBy, /^acc_/);
  const [first, retry] = await calls("deploy");
  assert.equal(first.body.params.requestState, undefined);
  assert.equal(first.body.params.inputResponses, undefined);
  assert.notEqual(retry.body.id, first.body.id, "the retry has a new JSON-RPC id");
  assert.deepEqual(retry.body.params.arguments, { env: "prod" });
});

test("2026-07-28 upstream: a declined question is the upstream's decline, and the upstream decides what follows", async () => {
  const before = (await calls("deploy")).length;
  const paused = await client.callTool({ name: "execute", arguments: { code: "return await tools.modern.deploy({ env: 'staging' })" } });
  assert.equal(paused.structuredContent?.status, "waiting_for_interaction", JSON.stringify(paused));
  const done = await client.callTool({
    name: "resume",
    arguments: { executionId: paused.structuredContent.executionId, action: "decline" },
  });
  assert.deepEqual(done.structuredContent?.result?.data?.structuredContent?.answer, { action: "decline" }, JSON.stringify(done));
  assert.equal((await calls("deploy")).length, before + 2);
});

test("2026-07-28 upstream: a native-mode client is asked the upstream's question inline", async () => {
  const asked = [];
  const native = new Client({ name: "native-e2e", version: "0.0.1" }, { capabilities: { elicitation: {} } });
  native.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(req.params.message);
    return { action: "accept", content: {} };
  });
  const url = new URL(srv.mcpUrl);
  url.searchParams.set("elicitation_mode", "native");
  await native.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }));
  try {
    const done = await native.callTool({ name: "execute", arguments: { code: "return await tools.modern.deploy({ env: 'dev' })" } });
    assert.equal(done.structuredContent?.result?.data?.structuredContent?.answer?.action, "accept", JSON.stringify(done));
    assert.equal(asked.length, 1);
    assert.match(asked[0], /^Approve modern\.deploy\?\n\nThe integration asks: Deploy to dev\?/);
  } finally {
    await native.close().catch(() => {});
  }
});

test("2026-07-28 upstream: `executor call` pauses on the question; `executor resume` answers it", () => {
  let paused = "";
  try {
    paused = cli("call", "modern.deploy", '{"env": "qa"}', "--allow-local-network");
  } catch (e) {
    paused = String(e.stdout ?? e.message);
  }
  const id = paused.match(/^executionId: (exec_[0-9a-f-]+)$/m)?.[1];
  assert.ok(id, paused);
  assert.match(paused, /The integration asks: Deploy to qa\?/);
  const resumed = srv.cli(["resume", id, "--action", "accept", "--wait", "0", "--allow-local-network", "--data-dir", srv.dataDir]);
  assert.match(resumed, /"action": "accept"/, resumed);
});

test("2026-07-28 upstream: the management API's call by name cannot answer the upstream's question, and says so", async () => {
  const before = (await calls("deploy")).length;
  const res = await fetch(`${srv.base}/api/v1/tools/call`, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify({ path: "modern.deploy", input: { env: "api" } }),
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.isError, true, JSON.stringify(body));
  assert.equal(body.pausedExecutionId ?? null, null, "it did not pause");
  assert.match(body.text, /Deploy to api\? — a call by name from the management API cannot answer it/);
  assert.equal((await calls("deploy")).length, before + 1, "asked once, never answered");
});
