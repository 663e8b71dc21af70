// Upstream MCP sessions over time (SPEC §8, issue 41 §6), against a real
// stateful streamable HTTP server whose tool list the test changes with no
// notification (fixtures/mcp-sync-upstream.mjs): a call naming a tool the
// upstream no longer has re-syncs the list; the periodic re-sync
// (--upstream-resync-interval) finds a change nobody announced; sessions
// unused past --upstream-idle-timeout close; parallel calls run on more
// than one session.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, connectSdk, freePort, waitUntil } from "./harness.mjs";

const FIXTURE = fileURLToPath(new URL("./fixtures/mcp-sync-upstream.mjs", import.meta.url));
const IDLE_MS = 1500;
const RESYNC_MS = 1500;

const upstreams = [];
/** A fixture process serving `tools`; returns its URL, a way to change its tools, and its counts. */
const startUpstream = async (tools) => {
  const port = await freePort();
  const file = join(process.env.TMPDIR ?? "/tmp", `sync-tools-${port}.json`);
  writeFileSync(file, JSON.stringify(tools));
  const child = spawn(process.execPath, [FIXTURE, String(port), file], { stdio: ["ignore", "pipe", "inherit"] });
  upstreams.push(child);
  await new Promise((resolve) => child.stdout.once("data", resolve));
  const base = `http://127.0.0.1:${port}`;
  return {
    url: `${base}/mcp`,
    setTools: (names) => writeFileSync(file, JSON.stringify(names)),
    stats: async () => (await fetch(`${base}/stats`)).json(),
  };
};

let srv;
let agent;
const servers = [];
const start = async (args, idleMs = IDLE_MS) => {
  const server = await startServer({ args: ["--allow-local-network", "--upstream-idle-timeout", String(idleMs), ...args] });
  servers.push(server);
  return server;
};
const cli = (server, ...args) => server.cli([...args, "--org", "sync", "--data-dir", server.dataDir]);
const toolCount = (server, namespace) => Number(new RegExp(`^${namespace}\\tmcp\\t(\\d+) tools`, "m").exec(cli(server, "integrations", "list"))?.[1]);
/** The result of `code` run by `execute` (a tool call answers `{ok, data}` or `{ok: false, error}`). */
const run = async (client, code) => {
  const answer = await client.callTool({ name: "execute", arguments: { code } }, undefined, { timeout: 60_000 });
  assert.equal(answer.structuredContent?.status, "completed", JSON.stringify(answer));
  return answer.structuredContent.result;
};
const textOf = (call) => call.data?.content?.[0]?.text;

before(async () => {
  srv = await start([]);
  agent = (await connectSdk(srv, srv.mint("sync@example.com", "sync"))).client;
});
after(async () => {
  await agent?.close().catch(() => {});
  for (const server of servers) await server.cleanup();
  for (const child of upstreams) child.kill();
});

test("upstream: a call naming a tool the upstream no longer has re-syncs its list", async () => {
  const upstream = await startUpstream(["slow", "gone"]);
  cli(srv, "integrations", "add", "mcp", "--url", upstream.url, "--allow-local-network", "--namespace", "shifty");
  assert.equal(toolCount(srv, "shifty"), 2);
  upstream.setTools(["slow", "fresh"]);
  const listsBefore = (await upstream.stats()).lists;
  const failed = await run(agent, "return await tools.shifty.gone({})");
  assert.equal(failed.ok, false, JSON.stringify(failed));
  assert.match(failed.error.message, /gone not found/, JSON.stringify(failed));
  // The next list is the upstream's: `gone` is dropped, `fresh` arrives.
  await waitUntil("the re-synced tool list", () => /fresh/.test(cli(srv, "tools", "search", "fresh")), { ms: 10_000, every: 250 });
  assert.ok((await upstream.stats()).lists > listsBefore, "the tools were listed again");
  const fresh = await run(agent, "return await tools.shifty.fresh({})");
  assert.equal(textOf(fresh), "fresh ran", JSON.stringify(fresh));
});

test("upstream: the periodic re-sync finds a change nobody announced (--upstream-resync-interval)", async () => {
  // Sessions stay open meanwhile: only a list in use is kept fresh (a pool
  // whose sessions all idled out is dropped, and listed anew when used).
  const server = await start(["--upstream-resync-interval", String(RESYNC_MS)], 60_000);
  const client = (await connectSdk(server, server.mint("sync@example.com", "sync"))).client;
  try {
    const upstream = await startUpstream(["slow"]);
    cli(server, "integrations", "add", "mcp", "--url", upstream.url, "--allow-local-network", "--namespace", "quiet");
    // In use: the pool exists, so its list is kept fresh.
    assert.equal(textOf(await run(client, "return await tools.quiet.slow({})")), "slow ran");
    upstream.setTools(["slow", "added"]);
    await waitUntil("the periodic re-sync", () => toolCount(server, "quiet") === 2, { ms: 15_000, every: 250 });
    const added = await run(client, "return await tools.quiet.added({})");
    assert.equal(textOf(added), "added ran", JSON.stringify(added));
  } finally {
    await client.close().catch(() => {});
  }
});

test("upstream: sessions unused past --upstream-idle-timeout close", async () => {
  const upstream = await startUpstream(["slow"]);
  cli(srv, "integrations", "add", "mcp", "--url", upstream.url, "--allow-local-network", "--namespace", "idle");
  await run(agent, "return await tools.idle.slow({})");
  assert.ok((await upstream.stats()).open >= 1, "a session is open after the call");
  await waitUntil("every idle session closed", async () => (await upstream.stats()).open === 0, { ms: IDLE_MS + 8000, every: 200 });
  const stats = await upstream.stats();
  assert.equal(stats.closed, stats.opened, JSON.stringify(stats));
  // The next call opens a new one and answers.
  assert.equal(textOf(await run(agent, "return await tools.idle.slow({})")), "slow ran");
});

test("upstream: parallel calls run at once on more than one session", async () => {
  const upstream = await startUpstream(["slow"]);
  cli(srv, "integrations", "add", "mcp", "--url", upstream.url, "--allow-local-network", "--namespace", "wide");
  const out = await run(agent, "return await Promise.all(Array.from({ length: 6 }, () => tools.wide.slow({})))");
  assert.deepEqual(out.map(textOf), Array(6).fill("slow ran"), JSON.stringify(out));
  const stats = await upstream.stats();
  assert.ok(stats.sessionsInCalls > 1, `calls ran on ${stats.sessionsInCalls} session(s): serialised on one`);
  assert.ok(stats.mostInFlight > 1, `at most ${stats.mostInFlight} call(s) in flight at once`);
  assert.ok(stats.opened <= 8, `${stats.opened} sessions: over --max-upstream-sessions`);
});
