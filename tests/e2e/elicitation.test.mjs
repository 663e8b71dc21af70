// SPEC §9 native approvals and `executor resume`:
// - `?elicitation_mode=native` on a session-based revision: the server asks
//   with `elicitation/create` on the request's stream, lists no `resume`,
//   and the tools/call answers once the program has finished;
// - on 2026-07-28 (no server→client requests) the call answers
//   `input_required` and the client retries with `inputResponses`;
// - `executor resume ID --action …` decides a model-mode pause from a shell,
//   with the server running (it applies the decision) and without one
//   (the CLI replays the run and applies it itself).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Client as Client1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as Transport1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from "@modelcontextprotocol/client";
import { startServer, connectSdk, BIN, SESSIONLESS_VERSION, post, rpc, responseTo, clientInfo } from "./harness.mjs";

const run = promisify(execFile);
const GATED = "executor.coreTools.connections.list";
const GATED_CALL = `try { const r = await tools.${GATED}({}); return { ran: r.ok }; } catch (e) { return { threw: e.message }; }`;

let srv;
let bearer;
before(async () => {
  srv = await startServer({ args: ["--approval-window", "20000"] });
  bearer = srv.mint("native@example.com");
  srv.cli(["policies", "add", GATED, "require_approval", "--data-dir", srv.dataDir]);
});
after(async () => {
  await srv?.cleanup();
});

/** An SDK 1.x client on `?elicitation_mode=native` answering each elicitation with `answer(params)`. */
const nativeClient = async (answer, { declare = true } = {}) => {
  const asked = [];
  const client = new Client1({ name: "native-e2e", version: "0.0.1" }, { capabilities: declare ? { elicitation: {} } : {} });
  if (declare) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params);
      return answer(req.params);
    });
  }
  const url = new URL(srv.mcpUrl);
  url.searchParams.set("elicitation_mode", "native");
  const transport = new Transport1(url, { requestInit: { headers: { authorization: `Bearer ${bearer}` } } });
  await client.connect(transport);
  return { client, asked };
};

const toolNames = async (client) => (await client.listTools()).tools.map((t) => t.name).sort();

test("native: elicitation/create on the request's stream; accept runs the call, no resume tool listed", async () => {
  const { client, asked } = await nativeClient(() => ({ action: "accept", content: {} }));
  assert.deepEqual(await toolNames(client), ["execute", "skills"]);
  const r = await client.callTool({ name: "execute", arguments: { code: GATED_CALL } });
  assert.equal(r.isError, undefined, JSON.stringify(r));
  assert.deepEqual(r.structuredContent.result, { ran: true });
  assert.equal(asked.length, 1);
  assert.match(asked[0].message, new RegExp(`^Approve ${GATED.replaceAll(".", "\\.")}\\?`));
  assert.equal(asked[0].requestedSchema.type, "object");
  await client.close();
});

test("native: decline and cancel make the pending call throw; two approvals ask twice", async () => {
  for (const action of ["decline", "cancel"]) {
    const { client, asked } = await nativeClient(() => ({ action }));
    const r = await client.callTool({ name: "execute", arguments: { code: GATED_CALL } });
    assert.equal(asked.length, 1);
    assert.match(r.structuredContent.result.threw, /requires approval but the request was declined by the user/);
    await client.close();
  }
  let n = 0;
  const { client, asked } = await nativeClient(() => ({ action: ++n === 1 ? "accept" : "decline" }));
  const code = `const a = await tools.${GATED}({}); let b; try { await tools.${GATED}({}); b = "ran"; } catch { b = "declined"; } return [a.ok, b];`;
  const r = await client.callTool({ name: "execute", arguments: { code } });
  assert.deepEqual(r.structuredContent.result, [true, "declined"]);
  assert.equal(asked.length, 2);
  await client.close();
});

test("native: a client that answers with an error cancels the call; the session keeps working", async () => {
  const { client } = await nativeClient(() => {
    throw new Error("no human here");
  });
  const r = await client.callTool({ name: "execute", arguments: { code: GATED_CALL } });
  assert.match(r.structuredContent.result.threw, /declined by the user \(cancelled\)/);
  const again = await client.callTool({ name: "execute", arguments: { code: "return 2" } });
  assert.equal(again.structuredContent.result, 2);
  await client.close();
});

test("native: without the elicitation capability the session stays in model mode", async () => {
  const { client } = await nativeClient(null, { declare: false });
  assert.deepEqual(await toolNames(client), ["execute", "resume", "skills"]);
  const r = await client.callTool({ name: "execute", arguments: { code: GATED_CALL } });
  assert.equal(r.structuredContent.status, "waiting_for_interaction");
  const done = await client.callTool({ name: "resume", arguments: { executionId: r.structuredContent.executionId, action: "accept" } });
  assert.deepEqual(done.structuredContent.result, { ran: true });
  await client.close();
});

const connect2026 = async (answer) => {
  const asked = [];
  const client = new Client2({ name: "native-2026", version: "0.0.1" }, { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: SESSIONLESS_VERSION } } });
  client.setRequestHandler("elicitation/create", async (req) => {
    asked.push(req.params);
    return answer(req.params);
  });
  const url = new URL(srv.mcpUrl);
  url.searchParams.set("elicitation_mode", "native");
  await client.connect(new Transport2(url, { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }));
  return { client, asked };
};

test("2026-07-28 native: input_required, then the retry with inputResponses completes the run", async () => {
  const { client, asked } = await connect2026(() => ({ action: "accept", content: {} }));
  assert.deepEqual(await toolNames(client), ["execute", "skills"]);
  const r = await client.callTool({ name: "execute", arguments: { code: GATED_CALL } });
  assert.deepEqual(r.structuredContent.result, { ran: true }, JSON.stringify(r));
  assert.equal(asked.length, 1);
  assert.match(asked[0].message, /^Approve executor\.coreTools\.connections\.list\?/);
  const declined = await connect2026(() => ({ action: "decline" }));
  const d = await declined.client.callTool({ name: "execute", arguments: { code: GATED_CALL } });
  assert.match(d.structuredContent.result.threw, /declined by the user/);
  await client.close();
  await declined.client.close();
});

const META = {
  "io.modelcontextprotocol/protocolVersion": SESSIONLESS_VERSION,
  "io.modelcontextprotocol/clientInfo": clientInfo,
  "io.modelcontextprotocol/clientCapabilities": { elicitation: {} },
};
const raw2026 = (params, token = bearer) =>
  post({ ...srv, mcpUrl: `${srv.mcpUrl}?elicitation_mode=native` }, rpc("tools/call", { ...params, _meta: META }), {
    bearer: token,
    protocolVersion: SESSIONLESS_VERSION,
    extra: { "mcp-method": "tools/call", "mcp-name": params.name },
  });
const resultOf = async (res) => {
  const body = JSON.parse(res.body);
  assert.ok(body.result, res.body);
  return body.result;
};

test("2026-07-28 native, raw: the requestState is signed for its caller; forged, changed or foreign state is refused", async () => {
  const first = await resultOf(await raw2026({ name: "execute", arguments: { code: GATED_CALL } }));
  assert.equal(first.resultType, "input_required", JSON.stringify(first));
  const ask = first.inputRequests.approval;
  assert.equal(ask.method, "elicitation/create");
  assert.equal(ask.params.mode, "form");
  assert.equal(typeof first.requestState, "string");

  assert.match(first.requestState, /^executor\/v2\./, "a signed state");

  // Another tenant presenting the state is refused and changes nothing.
  const stranger = srv.mint("stranger-2026@example.com");
  const foreign = JSON.parse((await raw2026({ name: "execute", arguments: { code: GATED_CALL }, requestState: first.requestState, inputResponses: { approval: { action: "accept" } } }, stranger)).body);
  assert.equal(foreign.error?.code, -32602, JSON.stringify(foreign));
  assert.match(foreign.error.message, /issued to another caller/);

  // A forged or changed state, and a retry without the answer, are invalid params.
  const forged = JSON.parse((await raw2026({ name: "execute", arguments: { code: "1" }, requestState: "nope", inputResponses: { approval: { action: "accept" } } })).body);
  assert.equal(forged.error?.code, -32602, JSON.stringify(forged));
  const [head, signature] = first.requestState.split(/\.(?=[^.]*$)/);
  const changedState = `${head.slice(0, -2)}${head.endsWith("A") ? "B" : "A"}${head.slice(-1)}.${signature}`;
  const tampered = JSON.parse((await raw2026({ name: "execute", arguments: { code: "1" }, requestState: changedState, inputResponses: { approval: { action: "accept" } } })).body);
  assert.equal(tampered.error?.code, -32602, JSON.stringify(tampered));
  assert.match(tampered.error.message, /changed|not issued/);
  const unanswered = JSON.parse((await raw2026({ name: "execute", arguments: { code: "1" }, requestState: first.requestState })).body);
  assert.equal(unanswered.error?.code, -32602, JSON.stringify(unanswered));

  const done = await resultOf(await raw2026({ name: "execute", arguments: { code: GATED_CALL }, requestState: first.requestState, inputResponses: { approval: { action: "accept", content: {} } } }));
  assert.equal(done.resultType, "complete");
  assert.deepEqual(done.structuredContent.result, { ran: true });
  // A repeated retry is idempotent.
  const again = await resultOf(await raw2026({ name: "execute", arguments: { code: GATED_CALL }, requestState: first.requestState, inputResponses: { approval: { action: "accept" } } }));
  assert.deepEqual(again.structuredContent, done.structuredContent);
});

const cli = (args, opts = {}) => run(BIN, [...args, "--data-dir", srv.dataDir], { encoding: "utf8", env: srv.env, ...opts });

test("executor resume: the running server applies a decision made from a shell", async () => {
  const { client } = await connectSdk(srv, bearer);
  const paused = await client.callTool({ name: "execute", arguments: { code: GATED_CALL } });
  const id = paused.structuredContent.executionId;
  assert.match(id, /^exec_/);
  // A long --wait with a short process timeout: only the server applying
  // the decision (not the CLI's own fallback after the wait) passes.
  const { stdout } = await cli(["resume", id, "--action", "accept", "--wait", "120"], { timeout: 20_000 });
  assert.match(stdout, /"ran": true/, stdout);
  // The agent's own resume now sees the same, settled result.
  const viaTool = await client.callTool({ name: "resume", arguments: { executionId: id, action: "accept" } });
  assert.deepEqual(viaTool.structuredContent.result, { ran: true });
  // Issue 37: deciding a run that was decided says so (and which way).
  const conflicting = await cli(["resume", id, "--action", "decline"]).catch((e) => e);
  assert.equal(conflicting.code, 1);
  assert.match(conflicting.stderr, /was decided and has finished|was already decided \(approved\)/);
  const unknown = await cli(["resume", "exec_00000000-0000-0000-0000-000000000000", "--action", "accept"]).catch((e) => e);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stdout, /was not found/);
  await client.close();
});

test("executor resume: with no server holding the run, the CLI replays and applies it", async () => {
  const { client } = await connectSdk(srv, bearer);
  const code = `const before = (await tools.executor.coreTools.policies.list({})).data.policies.length; const r = await tools.${GATED}({}); return { before, ran: r.ok };`;
  const paused = await client.callTool({ name: "execute", arguments: { code } });
  const id = paused.structuredContent.executionId;
  await client.close();
  await srv.kill9();
  const { stdout } = await cli(["resume", id, "--action", "accept", "--wait", "1"]);
  assert.match(stdout, /"ran": true/, stdout);
  assert.match(stdout, /"before": 1/, stdout);
  await srv.restart();
  const { client: after } = await connectSdk(srv, bearer);
  const repeat = await after.callTool({ name: "resume", arguments: { executionId: id, action: "accept" } });
  assert.deepEqual(repeat.structuredContent.result, { before: 1, ran: true });
  await after.close();
});

test("executor resume: answers a native elicitation the client leaves open", async () => {
  const { client, asked } = await nativeClient(() => new Promise(() => {}));
  const marker = `/* native-cli-${Date.now()} */`;
  const pending = client.callTool({ name: "execute", arguments: { code: `${marker} ${GATED_CALL}` } }, undefined, { timeout: 60_000 });
  let id;
  for (let i = 0; i < 100 && !id; i++) {
    const { stdout } = await cli(["executions", "list"]);
    id = stdout.split("\n").find((l) => l.includes("waiting_for_interaction") && l.includes(marker))?.split("\t")[0];
    if (!id) await new Promise((r) => setTimeout(r, 100));
  }
  assert.match(id ?? "", /^exec_/, "the paused execution is listed");
  assert.equal(asked.length, 1);
  await cli(["resume", id, "--action", "accept", "--wait", "120"], { timeout: 20_000 });
  const r = await pending;
  assert.deepEqual(r.structuredContent.result, { ran: true }, JSON.stringify(r));
  await client.close();
});
