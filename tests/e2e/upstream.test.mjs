// SPEC §8 upstream MCP servers end to end: @modelcontextprotocol/server-everything
// over stdio (a child the server supervises) and over streamable HTTP, and a
// small server the tests own (fixtures/mcp-upstream.mjs) for isError, a
// destructive tool, clashing names and a tool list that changes. Sessions
// are counted at the upstream: each stdio child says "Starting default
// (STDIO) server" on its stderr (which goes to our log), the HTTP server
// prints "Session initialized" per session on its stdout.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import http from "node:http";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { startServer, connectSdk, runOk, freePort, sleep, waitUntil, BIN } from "./harness.mjs";

const EVERYTHING = fileURLToPath(new URL("./node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url));
const OWN = fileURLToPath(new URL("./fixtures/mcp-upstream.mjs", import.meta.url));
const NODE = process.execPath;
const ENV_TOKEN = "tok-123-of-the-own-child";

/** An LZ4 block with its size prepended (little-endian u32), decoded. */
const lz4Unpack = (buf) => {
  const out = Buffer.alloc(buf.readUInt32LE(0));
  let i = 4;
  let o = 0;
  const length = (n) => {
    if (n !== 15) return n;
    for (let b = 255; b === 255; ) n += b = buf[i++];
    return n;
  };
  while (i < buf.length) {
    const token = buf[i++];
    const literals = length(token >> 4);
    buf.copy(out, o, i, i + literals);
    i += literals;
    o += literals;
    if (i >= buf.length) break;
    const offset = buf.readUInt16LE(i);
    i += 2;
    const match = length(token & 15) + 4;
    for (let k = 0; k < match; k++, o++) out[o] = out[o - offset];
  }
  return out.toString("utf8");
};

let srv;
let client;
let everythingHttp;
let everythingSse;
const transcript = [];

/** server-everything over streamable HTTP (or legacy SSE) on `port`, its output kept. */
const startEverythingHttp = async (port, mode = "streamableHttp") => {
  const child = spawn(NODE, [EVERYTHING, mode], { env: { ...process.env, PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
  const path = mode === "sse" ? "/sse" : "/mcp";
  const s = { child, port, out: "", url: `http://127.0.0.1:${port}${path}` };
  child.stdout.on("data", (d) => (s.out += d));
  child.stderr.on("data", (d) => (s.out += d));
  await waitUntil("server-everything listening", () => /listening on port|running on port/i.test(s.out), { ms: 15_000 });
  s.sessions = () => (s.out.match(/Session initialized/g) ?? []).length;
  s.stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  };
  return s;
};

before(async () => {
  srv = await startServer({
    args: ["--allow-stdio-integrations", "--allow-local-network"],
    env: { EXECUTOR_PROBE_NOT_FOR_CHILDREN: "1" },
  });
  ({ client } = await connectSdk(srv, srv.mint("upstream@example.com", "up")));
  cli("integrations", "add", "mcp", "--command", NODE, "--arg", EVERYTHING, "--arg", "stdio", "--namespace", "everything");
  cli("integrations", "add", "mcp", "--command", NODE, "--arg", OWN, "--env", `UPSTREAM_TOKEN=${ENV_TOKEN}`, "--namespace", "own");
  everythingHttp = await startEverythingHttp(await freePort());
  cli("integrations", "add", "mcp", "--url", everythingHttp.url, "--allow-local-network", "--namespace", "evhttp");
  everythingSse = await startEverythingHttp(await freePort(), "sse");
  cli("integrations", "add", "mcp", "--url", everythingSse.url, "--transport", "sse", "--allow-local-network", "--namespace", "evsse");
  // `auto` tries streamable HTTP first, then falls back to SSE.
  cli("integrations", "add", "mcp", "--url", everythingSse.url, "--allow-local-network", "--namespace", "evauto");
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
  await everythingHttp?.stop();
  await everythingSse?.stop();
});

const cli = (...args) => srv.cli([...args, "--org", "up", "--data-dir", srv.dataDir]);
// For a server that lives in this process: a synchronous CLI would block it.
const cliAsync = (...args) =>
  new Promise((resolve, reject) =>
    execFile(BIN, [...args, "--org", "up", "--data-dir", srv.dataDir], { env: srv.env }, (error, stdout, stderr) =>
      error ? reject(new Error(`${args.join(" ")}: ${stderr}`)) : resolve(stdout),
    ),
  );
const run = (code) => runOk(client, code, transcript);

/** The server's child processes whose command line mentions `needle`. */
const childrenOf = (pid, needle) =>
  readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, "utf8");
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
        return ppid === pid && readFileSync(`/proc/${p}/cmdline`, "utf8").includes(needle);
      } catch {
        return false;
      }
    })
    .map(Number);
const alive = (pid) => existsSync(`/proc/${pid}`) && !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
const stdioStarts = () => (srv.log.match(/Starting default \(STDIO\) server/g) ?? []).length;

test("mcp: each server's tools are listed under its namespace, names normalised", async () => {
  const listed = cli("integrations", "list");
  assert.match(listed, /^everything\tmcp\t13 tools\t\(no base URL\)\t.*index\.js stdio\tok$/m);
  assert.match(listed, /^evhttp\tmcp\t13 tools\thttp:\/\/127\.0\.0\.1:\d+\/mcp\t/m);
  assert.match(listed, /^evsse\tmcp\t13 tools\thttp:\/\/127\.0\.0\.1:\d+\/sse\t/m);
  assert.match(listed, /^evauto\tmcp\t13 tools\t/m);
  const names = await run("return (await tools.search({ namespace: 'everything', limit: 50 })).items.map((i) => i.path)");
  for (const name of ["everything.get_sum", "everything.echo", "everything.trigger_long_running_operation", "everything.get_structured_content"])
    assert.ok(names.includes(name), `${name} in ${names}`);
  const own = await run("return (await tools.search({ namespace: 'own', limit: 50 })).items.map((i) => i.path).sort()");
  assert.deepEqual(own, ["own.add_tool", "own.big", "own.drop_table", "own.echo", "own.echo_2", "own.env", "own.fail", "own.whoami"]);
  const described = await run("return await tools.describe.tool({ path: 'everything.get_sum' })");
  assert.match(described.inputTypeScript, /a: number/);
});

test("mcp: calls carry arguments and bring back content and structured content", async () => {
  for (const ns of ["everything", "evhttp", "evsse", "evauto"]) {
    const sum = await run(`return await tools.${ns}.get_sum({ a: 2, b: 3 })`);
    assert.equal(sum.ok, true, JSON.stringify(sum));
    assert.deepEqual(sum.data.content, [{ type: "text", text: "The sum of 2 and 3 is 5." }]);
    const weather = await run(`return await tools.${ns}.get_structured_content({ location: 'New York' })`);
    assert.equal(typeof weather.data.structuredContent.temperature, "number", JSON.stringify(weather));
  }
  // The upstream's own names are sent: "Echo" and "echo" are two tools.
  const [upper, lower] = await run("return [await tools.own.echo({ text: 'Hi' }), await tools.own.echo_2({ text: 'Hi' })]");
  assert.equal(upper.data.content[0].text, "Hi");
  assert.equal(lower.data.content[0].text, "hi");
});

test("mcp: an isError result is mcp_tool_error with its first text", async () => {
  const failed = await run("return await tools.own.fail({ why: 'the disk is full' })");
  assert.equal(failed.ok, false);
  assert.equal(failed.error.code, "mcp_tool_error");
  assert.equal(failed.error.message, "it broke: the disk is full");
  assert.equal(failed.error.details.content[0].text, "it broke: the disk is full");
});

test("mcp: a destructiveHint tool waits for approval, then runs", async () => {
  const paused = await client.callTool({ name: "execute", arguments: { code: "return await tools.own.drop_table({ table: 'users' })" } });
  assert.equal(paused.structuredContent.status, "waiting_for_interaction", JSON.stringify(paused));
  const done = await client.callTool({ name: "resume", arguments: { executionId: paused.structuredContent.executionId, action: "accept" } });
  assert.equal(done.structuredContent.result.data.content[0].text, "dropped users", JSON.stringify(done));
});

test("mcp: a long-running tool that reports progress completes", async () => {
  const done = await run("return await tools.everything.trigger_long_running_operation({ duration: 2, steps: 4 })");
  assert.equal(done.ok, true, JSON.stringify(done));
  assert.match(done.data.content[0].text, /completed/);
});

test("mcp: 50 sequential calls and parallel ones reuse the pooled sessions", async () => {
  await run("return await tools.everything.get_sum({ a: 0, b: 0 })");
  const starts = stdioStarts();
  const sessions = everythingHttp.sessions();
  for (const ns of ["everything", "evhttp"]) {
    const sums = await run(`
      const out = [];
      for (let i = 0; i < 50; i++) out.push((await tools.${ns}.get_sum({ a: i, b: 1 })).data.content[0].text);
      return out;`);
    assert.equal(sums.length, 50);
    assert.equal(sums[49], "The sum of 49 and 1 is 50.");
  }
  assert.equal(stdioStarts(), starts, "the stdio child was started again");
  assert.ok(everythingHttp.sessions() - sessions <= 1, `HTTP sessions opened for 50 calls: ${everythingHttp.sessions() - sessions}`);
  const parallel = await run(`
    const calls = [];
    for (let i = 0; i < 12; i++) calls.push(tools.evhttp.get_sum({ a: i, b: i }), tools.everything.get_sum({ a: i, b: i }));
    return (await Promise.all(calls)).map((r) => r.ok);`);
  assert.equal(parallel.length, 24);
  assert.ok(parallel.every(Boolean), JSON.stringify(parallel));
  assert.ok(everythingHttp.sessions() - sessions <= 8, `at most the cap of sessions: ${everythingHttp.sessions() - sessions}`);
  assert.equal(stdioStarts(), starts, "one child serves parallel calls");
  assert.equal(childrenOf(srv.child.pid, "index.js").length, 1);
});

test("mcp: the child killed mid-call answers a clear error, and the next call works", async () => {
  await run("return await tools.everything.get_sum({ a: 1, b: 1 })");
  const [pid] = childrenOf(srv.child.pid, "index.js");
  assert.ok(pid, "a running child");
  const running = client.callTool({ name: "execute", arguments: { code: "return await tools.everything.trigger_long_running_operation({ duration: 5, steps: 5 })" } });
  await sleep(800);
  process.kill(pid, "SIGKILL");
  const ended = await running;
  const result = ended.structuredContent.result;
  assert.equal(result.ok, false, JSON.stringify(ended));
  assert.equal(result.error.code, "integration_unavailable");
  assert.match(result.error.message, /session ended during the call/);
  const again = await run("return await tools.everything.get_sum({ a: 4, b: 4 })");
  assert.equal(again.data.content[0].text, "The sum of 4 and 4 is 8.");
  assert.ok(childrenOf(srv.child.pid, "index.js").every((p) => p !== pid));
});

test("mcp: the upstream HTTP server restarted: the forgotten session is replaced without the agent noticing", async () => {
  await run("return await tools.evhttp.get_sum({ a: 1, b: 1 })");
  const port = everythingHttp.port;
  await everythingHttp.stop();
  everythingHttp = await startEverythingHttp(port);
  const sum = await run("return await tools.evhttp.get_sum({ a: 20, b: 22 })");
  assert.equal(sum.ok, true, JSON.stringify(sum));
  assert.equal(sum.data.content[0].text, "The sum of 20 and 22 is 42.");
});

test("mcp: a child gets only PATH, HOME and the like, plus its --env", async () => {
  const env = await run("return await tools.own.env({})");
  const names = env.data.structuredContent.names;
  assert.ok(names.includes("PATH"), names.join(","));
  assert.ok(names.includes("UPSTREAM_TOKEN"));
  assert.ok(!names.some((n) => n.startsWith("EXECUTOR_") || n === "RUST_LOG"), names.join(","));
});

// Issue 41 §4: a stdio command's --env values are secrets (SPEC §9).
test("mcp: --env values are sealed at rest and scrubbed from answers and the log; the child gets them in clear", async () => {
  const env = await run("return await tools.own.env({})");
  const { token, digest } = env.data.structuredContent;
  assert.equal(digest, createHash("sha256").update(ENV_TOKEN).digest("hex"), "the child got the value in clear");
  assert.notEqual(token, ENV_TOKEN);
  assert.ok(!JSON.stringify(env).includes(ENV_TOKEN), "the answer echoes no --env value");
  await waitUntil("the child's stderr line in the log", () => /env tool: UPSTREAM_TOKEN=/.test(srv.log), { ms: 5000 });
  assert.ok(!srv.log.includes(ENV_TOKEN), "the log holds no --env value");
  // The stored documents, unpacked (LZ4 blocks; see crates/store/src/packed.rs).
  const hex = srv.pg
    ? srv.pg.sql("select encode(document, 'hex') from integrations")
    : execFileSync("python3", ["-c", `import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print("\\n".join(r[0] for r in c.execute("select hex(document) from integrations")))`, join(srv.dataDir, "executor.db")]).toString();
  const stored = hex.trim().split("\n").map((h) => lz4Unpack(Buffer.from(h.trim(), "hex"))).join("\n");
  assert.match(stored, /"UPSTREAM_TOKEN","v1:/, "the integration is stored, its value sealed");
  assert.ok(!stored.includes(ENV_TOKEN), "the stored record holds no --env value in clear");
});

test("mcp: the upstream's tools/list_changed re-syncs the tools, and open sessions hear of it", async () => {
  const { client: listening, listening: getStreamOpen } = await connectSdk(srv, srv.mint("upstream@example.com", "up"));
  let notified = 0;
  listening.setNotificationHandler(ToolListChangedNotificationSchema, () => { notified++; });
  await listening.listTools();
  await getStreamOpen();
  const added = await run("return await tools.own.add_tool({})");
  assert.equal(added.data.content[0].text, "added late");
  await waitUntil("the re-synced tool", async () => /own\tmcp\t9 tools/.test(cli("integrations", "list")), { ms: 15_000, every: 250 });
  await waitUntil("our tools/list_changed", () => notified > 0, { ms: 10_000 });
  const late = await run("return await tools.own.late({})");
  assert.equal(late.data.content[0].text, "late and here", JSON.stringify(late));
  await listening.close();
});

test("mcp: integrations remove stops the child", async () => {
  await run("return await tools.own.echo({ text: 'x' })");
  const [pid] = childrenOf(srv.child.pid, "mcp-upstream.mjs");
  assert.ok(pid, "the child runs");
  cli("integrations", "remove", "own");
  await waitUntil("the child gone", () => !alive(pid), { ms: 15_000, every: 200 });
});

test("mcp: without --allow-stdio-integrations a stdio call answers integration_unavailable naming the flag", async () => {
  let out;
  try {
    out = cli("call", "--email", "upstream@example.com", "everything.get_sum", '{"a":1,"b":2}');
    assert.fail("the call must fail");
  } catch (e) {
    out = String(e.stdout);
  }
  const answer = JSON.parse(out);
  assert.equal(answer.error.code, "integration_unavailable");
  assert.match(answer.error.message, /--allow-stdio-integrations/);
});

test("mcp: kill -9 of the server leaves no child behind", async () => {
  const other = await startServer({ args: ["--allow-stdio-integrations"] });
  try {
    const { client: c } = await connectSdk(other, other.mint("kill@example.com", "k"));
    other.cli(["integrations", "add", "mcp", "--command", NODE, "--arg", EVERYTHING, "--arg", "stdio", "--namespace", "everything", "--org", "k", "--data-dir", other.dataDir]);
    const sum = await runOk(c, "return await tools.everything.get_sum({ a: 1, b: 2 })");
    assert.equal(sum.ok, true, JSON.stringify(sum));
    const [pid] = childrenOf(other.child.pid, "index.js");
    assert.ok(pid, "the child runs");
    await other.kill9();
    await waitUntil("the orphan gone", () => !alive(pid), { ms: 10_000, every: 100 });
  } finally {
    await other.cleanup();
  }
});

test("mcp: a server that answers with an OAuth challenge is stored as needing a login", async () => {
  const guarded = http.createServer((req, res) => {
    req.resume();
    res.writeHead(401, { "www-authenticate": `Bearer resource_metadata="http://127.0.0.1:${guarded.address().port}/.well-known/oauth-protected-resource"` });
    res.end();
  });
  await new Promise((r) => guarded.listen(0, "127.0.0.1", r));
  try {
    const added = await cliAsync("integrations", "add", "mcp", "--url", `http://127.0.0.1:${guarded.address().port}/mcp`, "--allow-local-network", "--namespace", "locked");
    assert.match(added, /OAuth login.*executor connections login locked/);
    assert.match(cli("integrations", "list"), /^locked\tmcp\t0 tools\t.*\tneeds login$/m);
    const answer = await run("return await tools.locked.anything({})");
    assert.equal(answer.ok, false);
    assert.equal(answer.error.code, "connection_missing", JSON.stringify(answer));
    assert.match(answer.error.message, /executor connections login locked/);
  } finally {
    guarded.close();
  }
});

test("mcp: the connection's token goes to an HTTP upstream and never comes back to the agent", async () => {
  const port = await freePort();
  const own = spawn(NODE, [OWN, "http", String(port)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  own.stdout.on("data", (d) => (out += d));
  try {
    await waitUntil("the test upstream listening", () => /listening on port/.test(out), { ms: 15_000 });
    const token = "mcp-" + Math.random().toString(36).slice(2) + "-SECRET";
    cli("integrations", "add", "mcp", "--url", `http://127.0.0.1:${port}/mcp`, "--allow-local-network", "--namespace", "ownhttp");
    cli("connections", "set", "ownhttp", "--bearer", token);
    const me = await run("return await tools.ownhttp.whoami({})");
    assert.equal(me.ok, true, JSON.stringify(me));
    assert.equal(me.data.content[0].text, "you are Bearer [redacted]");
    assert.equal(me.data.structuredContent.auth, "Bearer [redacted]");
    assert.ok(!transcript.some((t) => t.includes(token)), "the token reached the agent");
  } finally {
    own.kill("SIGKILL");
  }
});

// Issue 41 §4: an upstream MCP server's answer is bounded before it is
// parsed, whether it comes as one JSON body or as an SSE event of a
// streamable HTTP answer (rmcp's own bound for an event is 16 MiB; ours is
// --max-upstream-response-bytes, 8 MiB by default): past it the call fails
// with a clear error, and the next call is served.
for (const mode of ["json", "sse"]) {
  test(`mcp: an answer over --max-upstream-response-bytes is refused before it is parsed (${mode})`, async () => {
    const port = await freePort();
    const own = spawn(NODE, [OWN, "http", String(port), mode], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    own.stdout.on("data", (d) => (out += d));
    try {
      await waitUntil("the test upstream listening", () => /listening on port/.test(out), { ms: 15_000 });
      const ns = `big${mode}`;
      cli("integrations", "add", "mcp", "--url", `http://127.0.0.1:${port}/mcp`, "--allow-local-network", "--namespace", ns);
      const small = await run(`return await tools.${ns}.big({ bytes: 1000 })`);
      assert.equal(small.ok, true, JSON.stringify(small).slice(0, 500));
      assert.equal(small.data.content[0].text.length, 1000);
      const over = await run(`const r = await tools.${ns}.big({ bytes: 9 * 1024 * 1024 }); return r.ok ? { read: r.data.content[0].text.length } : r`);
      assert.equal(over.read, undefined, `the 9 MiB answer was read whole (${over.read} bytes)`);
      assert.equal(over.ok, false, JSON.stringify(over).slice(0, 500));
      assert.ok(JSON.stringify(over).length < 2000, "the error is short");
      const again = await run(`return await tools.${ns}.big({ bytes: 10 })`);
      assert.equal(again.ok, true, JSON.stringify(again).slice(0, 500));
      assert.equal(again.data.content[0].text, "x".repeat(10));
    } finally {
      own.kill("SIGKILL");
    }
  });
}
