// SPEC §9 approvals in model mode: a call that needs approval pauses the
// execution; `resume` continues the same run, idempotently; decline makes
// the call throw; a paused approval survives kill -9 of the server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, connectSdk, waitUntil } from "./harness.mjs";

const GATED = "executor.coreTools.connections.list";
let srv;
let bearer;
let client;
before(async () => {
  srv = await startServer({ args: ["--approval-window", "3000"] });
  bearer = srv.mint("approvals@example.com");
  srv.cli(["policies", "add", GATED, "require_approval", "--data-dir", srv.dataDir]);
  ({ client } = await connectSdk(srv, bearer));
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
});

const execute = (code, c = client) => c.callTool({ name: "execute", arguments: { code } });
const resume = (executionId, action, c = client) => c.callTool({ name: "resume", arguments: { executionId, action } });
const GATED_CALL = `const before = await tools.executor.coreTools.policies.list({});
const r = await tools.${GATED}({});
return { before: before.data.policies.length, after: r };`;

const expectPaused = (r) => {
  assert.equal(r.isError, undefined, JSON.stringify(r));
  const s = r.structuredContent;
  assert.equal(s.status, "waiting_for_interaction", JSON.stringify(r));
  assert.match(s.executionId, /^exec_[0-9a-f-]{36}$/);
  assert.equal(s.interaction.kind, "form");
  assert.equal(s.interaction.address, GATED);
  assert.deepEqual(s.interaction.args, {});
  assert.ok(s.ttlMs > 0 && s.ttlMs <= 3000, `ttlMs ${s.ttlMs}`);
  assert.ok(r.content[0].text.startsWith(`Execution paused: Approve ${GATED}?`), r.content[0].text);
  assert.ok(r.content[0].text.includes(`executionId: ${s.executionId}`));
  return s.executionId;
};

test("approvals: accept continues the same run; a repeat returns the same result", async () => {
  const id = expectPaused(await execute(GATED_CALL));
  const done = await resume(id, "accept");
  assert.equal(done.isError, undefined, JSON.stringify(done));
  assert.deepEqual(done.structuredContent.result, { before: 1, after: { ok: true, data: { connections: [] } } });
  const again = await resume(id, "accept");
  assert.deepEqual(again, done, "idempotent resume");
  const other = await resume(id, "decline");
  assert.equal(other.isError, true);
  assert.equal(other.structuredContent.status, "execution_already_settled");
  assert.equal(other.structuredContent.recovery, "re_execute");
});

test("approvals: decline makes the pending call throw inside the program", async () => {
  const id = expectPaused(await execute(`try { await tools.${GATED}({}); return "ran"; } catch (e) { return "caught: " + e.message; }`));
  const done = await resume(id, "decline");
  assert.equal(done.structuredContent.result, `caught: Tool "${GATED}" requires approval but the request was declined by the user.`);
  const uncaught = expectPaused(await execute(`return await tools.${GATED}({})`));
  const failed = await resume(uncaught, "cancel");
  assert.equal(failed.isError, true);
  assert.match(failed.content[0].text, /declined by the user/);
});

test("approvals: concurrent duplicate resumes get one result; other clients and tenants", async () => {
  const id = expectPaused(await execute(GATED_CALL));
  const [a, b] = await Promise.all([resume(id, "accept"), resume(id, "accept")]);
  assert.deepEqual(a, b);
  assert.equal(a.structuredContent.status, "completed");

  // A second client of the same account (another session) may resume.
  const second = await connectSdk(srv, bearer);
  const id2 = expectPaused(await execute(GATED_CALL));
  const byOther = await resume(id2, "accept", second.client);
  assert.equal(byOther.structuredContent.status, "completed", JSON.stringify(byOther));

  // Another tenant may not, and the execution is untouched.
  const stranger = await connectSdk(srv, srv.mint("stranger@example.com"));
  const id3 = expectPaused(await execute(GATED_CALL));
  const refused = await resume(id3, "accept", stranger.client);
  assert.equal(refused.isError, true);
  assert.equal(refused.structuredContent.status, "execution_forbidden");
  assert.equal(refused.structuredContent.recovery, "re_execute");
  assert.match(refused.content[0].text, /Run `execute` again/);
  const mine = await resume(id3, "accept");
  assert.equal(mine.structuredContent.status, "completed");

  const missing = await resume("exec_00000000-0000-0000-0000-000000000000", "accept");
  assert.equal(missing.structuredContent.status, "execution_not_found");
  assert.equal(missing.structuredContent.recovery, "re_execute");
  await second.client.close();
  await stranger.client.close();
});

test("approvals: the window closes with approval_timeout, then resume says expired", async () => {
  const pausedAt = Date.now();
  const id = expectPaused(await execute(`try { await tools.${GATED}({}); } catch (e) { return e.message; }`));
  // The run settles on its own once the window closes; its record says so.
  const show = () => JSON.parse(srv.cli(["executions", "show", id, "--data-dir", srv.dataDir]));
  await waitUntil("the approval window to close", () => show().status !== "waiting_for_interaction", { ms: 10_000, every: 100 });
  assert.ok(Date.now() - pausedAt >= 2500, `settled after ${Date.now() - pausedAt} ms, before the 3000 ms window`);
  const late = await resume(id, "accept");
  assert.equal(late.isError, true);
  assert.equal(late.structuredContent.status, "execution_expired");
  assert.equal(late.structuredContent.recovery, "re_execute");
  const record = JSON.parse(srv.cli(["executions", "show", id, "--data-dir", srv.dataDir]));
  assert.equal(
    record.result,
    `Tool "${GATED}" requires approval but the request was declined by the user (approval_timeout).`,
    "the program saw the timeout as a declined call",
  );
});

test("approvals: a paused approval survives kill -9; resume replays up to the call", async () => {
  const id = expectPaused(await execute(GATED_CALL));
  await client.close().catch(() => {});
  await srv.kill9();
  await srv.restart();
  ({ client } = await connectSdk(srv, bearer));
  const done = await resume(id, "accept");
  assert.equal(done.isError, undefined, JSON.stringify(done));
  assert.deepEqual(done.structuredContent.result, { before: 1, after: { ok: true, data: { connections: [] } } });
  const again = await resume(id, "accept");
  assert.deepEqual(again.structuredContent, done.structuredContent, "idempotent after restart too");
});
