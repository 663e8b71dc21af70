// SPEC §9 policies: grammar checked on save, first match by position,
// `block` hides a tool from search and describe and refuses calls, and a
// running server sees CLI changes at once.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, connectSdk, runOk } from "./harness.mjs";

let srv;
let client;
before(async () => {
  srv = await startServer();
  const bearer = srv.mint("policies@example.com");
  ({ client } = await connectSdk(srv, bearer));
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
});

const cli = (...args) => srv.cli([...args, "--data-dir", srv.dataDir]);
const run = (code) => runOk(client, code);
const cliFails = (args, pattern) => {
  assert.throws(() => cli(...args), (e) => pattern.test(String(e.stderr)), `executor ${args.join(" ")} should fail`);
};

test("policies: malformed patterns and actions are refused when saved", () => {
  for (const bad of ["git*", "a..b", ".*", "a.**"]) cliFails(["policies", "add", bad, "block"], /invalid pattern/);
  cliFails(["policies", "add", "github.*", "maybe"], /unknown policy action/);
  assert.equal(cli("policies", "list").trim(), "", "nothing was saved");
});

test("policies: block, require_approval and first match, live without a restart", async () => {
  const blocked = cli("policies", "add", "executor.coreTools.connections.*", "block").trim().split("\t")[0];
  cli("policies", "add", "executor.coreTools.integrations.list", "require_approval");
  // A later, broader allow does not override the earlier rules.
  cli("policies", "add", "executor.*", "allow");

  const call = await run("return await tools.executor.coreTools.connections.list({})");
  assert.equal(call.ok, false);
  assert.equal(call.error.code, "tool_blocked");
  // Block comes before validation: bad arguments to a blocked tool are still "blocked".
  const badArgs = await run("return await tools.executor.coreTools.connections.list({ bogus: 1 })");
  assert.equal(badArgs.error?.code, "tool_blocked", JSON.stringify(badArgs));

  const search = await run("return await tools.search({ query: 'connections' })");
  assert.ok(!search.items.some((i) => i.path === "executor.coreTools.connections.list"), JSON.stringify(search));
  const describe = await run("return await tools.describe.tool({ path: 'executor.coreTools.connections.list' })");
  assert.equal(describe.error?.code, "tool_not_found");

  // require_approval pauses the run (approvals.test.mjs covers resuming).
  const gated = await client.callTool({ name: "execute", arguments: { code: "return await tools.executor.coreTools.integrations.list({})" } });
  assert.equal(gated.structuredContent.status, "waiting_for_interaction", JSON.stringify(gated));
  assert.equal(gated.structuredContent.interaction.address, "executor.coreTools.integrations.list");

  const listed = await run("return await tools.executor.coreTools.policies.list({})");
  assert.deepEqual(
    listed.data.policies.map((p) => [p.pattern, p.action, p.position]),
    [
      ["executor.coreTools.connections.*", "block", 0],
      ["executor.coreTools.integrations.list", "require_approval", 1],
      ["executor.*", "allow", 2],
    ],
  );

  // Removing the block takes effect on the next call, without a restart.
  cli("policies", "remove", blocked);
  const again = await run("return await tools.executor.coreTools.connections.list({})");
  assert.equal(again.ok, true, JSON.stringify(again));
  // The same search now finds it: the blocked search above was not empty by accident.
  const visible = await run("return await tools.search({ query: 'connections' })");
  assert.ok(visible.items.some((i) => i.path === "executor.coreTools.connections.list"), JSON.stringify(visible));

  // --position 0 puts a rule first.
  cli("policies", "add", "*", "block", "--position", "0");
  const all = await run("return await tools.executor.coreTools.policies.list({})");
  assert.equal(all.ok, false);
  assert.equal(all.error.code, "tool_blocked");
});
