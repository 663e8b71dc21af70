// SPEC §12 limits against the real binary: header and body read timeouts,
// the connection cap under a low descriptor limit, the JSON-RPC batch cap,
// live sessions per (account, org), GET streams per session; and the
// hardening of the side routes: the Host check of the protected-resource
// metadata and the `/metrics` token.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import net from "node:net";
import {
  BIN, IDLE_MS, startServer, freePort, sleep, request, post, rpc, note, openGet, openStream, drain, initSession, mcpHeaders,
  clientInfo, waitUntil,
} from "./harness.mjs";

/** A raw TCP connection that records when the server closes it, and what it sent. */
const rawConnection = (port) =>
  new Promise((resolve, reject) => {
    const sock = net.connect({ host: "127.0.0.1", port });
    const conn = { sock, received: "", closedAt: undefined, openedAt: undefined };
    conn.closed = new Promise((r) => sock.once("close", () => r((conn.closedAt = Date.now()))));
    sock.on("data", (d) => (conn.received += d.toString("latin1")));
    sock.on("error", () => {});
    sock.once("connect", () => {
      conn.openedAt = Date.now();
      resolve(conn);
    });
    sock.once("error", reject);
  });

/** Writes `text` one byte every `everyMs` until the socket closes or the text runs out. */
const drip = async (conn, text, everyMs) => {
  for (const ch of text) {
    if (conn.closedAt !== undefined || conn.sock.destroyed) return;
    conn.sock.write(ch);
    await sleep(everyMs);
  }
};

/** Resolves the close time, or undefined if the socket is still open after `ms`. */
const closedWithin = (conn, ms) => Promise.race([conn.closed, sleep(ms).then(() => undefined)]);

// Every request here closes its connection: the servers below time out idle
// keep-alive connections faster than node's agent forgets them.
const CLOSE = { connection: "close" };

describe("read timeouts (--header-read-timeout 1000, --body-read-timeout 1000)", () => {
  const HEADER_MS = 1000;
  const BODY_MS = 1000;
  // Timers, scheduling and a loaded CI machine: the bound we assert.
  const SLACK_MS = 2500;
  let srv, bearer;
  before(async () => {
    srv = await startServer({
      args: ["--header-read-timeout", String(HEADER_MS), "--body-read-timeout", String(BODY_MS)],
    });
    bearer = srv.mint("slow@example.com");
  });
  after(async () => {
    await srv?.cleanup();
  });

  test("10 clients sending their headers at ~3 bytes/s are closed within the header timeout", async () => {
    const conns = await Promise.all(Array.from({ length: 10 }, () => rawConnection(srv.port)));
    const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nAuthorization: Bearer ${bearer}\r\ncontent-type: application/json\r\n\r\n`;
    for (const c of conns) drip(c, head, 300);
    // Meanwhile other clients are served.
    const health = await request(`${srv.base}/healthz`, { method: "GET", headers: CLOSE });
    assert.equal(health.status, 200);
    for (const c of conns) {
      const at = await closedWithin(c, HEADER_MS + SLACK_MS + 1000);
      assert.ok(at !== undefined, `a slow header sender was still open after ${HEADER_MS + SLACK_MS + 1000} ms`);
      assert.ok(at - c.openedAt < HEADER_MS + SLACK_MS, `closed after ${at - c.openedAt} ms`);
      assert.ok(!c.received.startsWith("HTTP/1.1 2"), `no request was served: ${c.received.slice(0, 80)}`);
    }
  });

  test("a connection that sends nothing is closed after the header timeout", async () => {
    const c = await rawConnection(srv.port);
    const at = await closedWithin(c, HEADER_MS + SLACK_MS);
    assert.ok(at !== undefined, "an idle connection stayed open");
    assert.ok(at - c.openedAt >= HEADER_MS - 100, `closed too early, after ${at - c.openedAt} ms`);
  });

  test("10 authenticated clients whose bodies stall are answered 408 and closed within the body timeout", async () => {
    const body = JSON.stringify(rpc("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo }));
    const conns = await Promise.all(Array.from({ length: 10 }, () => rawConnection(srv.port)));
    const head =
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nAuthorization: Bearer ${bearer}\r\n` +
      `content-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: ${body.length}\r\n\r\n`;
    const sentHeadAt = Date.now();
    for (const c of conns) {
      c.sock.write(head);
      // A byte every 1.5 s: each gap is longer than the body timeout.
      drip(c, body, 1500);
    }
    for (const c of conns) {
      const at = await closedWithin(c, BODY_MS + SLACK_MS + 2000);
      assert.ok(at !== undefined, "a stalled body kept its connection open");
      assert.ok(at - sentHeadAt < BODY_MS + SLACK_MS + 1500, `closed after ${at - sentHeadAt} ms`);
      assert.match(c.received, /^HTTP\/1\.1 408 /, c.received.slice(0, 200));
      assert.match(c.received, /the request body stalled/);
    }
  });

  test("a body that keeps coming, each chunk within the timeout, is read in full", async () => {
    const body = JSON.stringify(rpc("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo }, 5));
    const c = await rawConnection(srv.port);
    c.sock.write(
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nAuthorization: Bearer ${bearer}\r\nconnection: close\r\n` +
        `content-type: application/json\r\naccept: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
    );
    // Five pieces, 400 ms apart: 1.6 s in all, more than the timeout.
    const size = Math.ceil(body.length / 5);
    for (let i = 0; i < body.length; i += size) {
      await sleep(400);
      c.sock.write(body.slice(i, i + size));
    }
    await closedWithin(c, 5000);
    assert.match(c.received, /^HTTP\/1\.1 200 /, c.received.slice(0, 200));
    assert.match(c.received, /"protocolVersion":"2025-06-18"/);
  });
});

describe("descriptor limit", () => {
  test("300 idle connections under `ulimit -n 256` do not lock new clients out, and the server lives", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "executor-e2e-ulimit-"));
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const quote = (s) => `'${s.replaceAll("'", "'\\''")}'`;
    const cmd =
      `ulimit -n 256 && exec ${quote(BIN)} serve --listen 127.0.0.1:${port} --data-dir ${quote(dataDir)} ` +
      `--session-idle-timeout ${IDLE_MS} --header-read-timeout 1000`;
    const child = spawn("bash", ["-c", cmd], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, RUST_LOG: "info" } });
    let log = "";
    child.stdout.on("data", (d) => (log += d));
    child.stderr.on("data", (d) => (log += d));
    const conns = [];
    try {
      await waitUntil("the server to answer /healthz", async () => {
        if (child.exitCode !== null) throw new Error(`server exited (${child.exitCode}): ${log}`);
        return (await request(`${base}/healthz`, { method: "GET", headers: CLOSE, timeoutMs: 1000 }).catch(() => ({}))).status === 200;
      });
      const bearer = execFileSync(BIN, ["token", "create", "--email", "fd@example.com", "--data-dir", dataDir], { encoding: "utf8" }).trim();
      for (let i = 0; i < 300; i++) conns.push(await rawConnection(port));
      const started = Date.now();
      const health = await request(`${base}/healthz`, { method: "GET", headers: CLOSE, timeoutMs: 20_000 });
      assert.equal(health.status, 200, `healthz: ${health.body}`);
      const res = await request(`${base}/mcp`, {
        method: "POST",
        headers: { ...mcpHeaders({ bearer }), ...CLOSE },
        body: rpc("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo }),
        timeoutMs: 20_000,
      });
      assert.equal(res.status, 200, res.body);
      assert.ok(res.headers["mcp-session-id"], "a session was created");
      assert.ok(Date.now() - started < 20_000);
      assert.equal(child.exitCode, null, `the server must not exit: ${log.slice(-2000)}`);
      assert.equal(child.signalCode, null);
    } finally {
      for (const c of conns) c.sock.destroy();
      child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("batches, sessions and streams (--max-sessions-per-principal 3, --max-get-streams-per-session 2)", () => {
  let srv, alice, bob, aliceOtherOrg;
  before(async () => {
    srv = await startServer({
      args: ["--max-sessions-per-principal", "3", "--max-get-streams-per-session", "2", "--metrics-token", "metrics-secret"],
    });
    alice = srv.mint("alice@example.com");
    bob = srv.mint("bob@example.com");
    aliceOtherOrg = srv.mint("alice@example.com", "other-org");
  });
  after(async () => {
    await srv?.cleanup();
  });

  test("a batch of 65 messages → 400 -32600 naming the limit of 64; 64 are answered", async () => {
    const { sessionId } = await initSession(srv, alice, "2025-03-26");
    const batch = (n) => Array.from({ length: n }, (_, i) => rpc("ping", undefined, i + 1));
    const refused = await post(srv, batch(65), { bearer: alice, sessionId, protocolVersion: "2025-03-26" });
    assert.equal(refused.status, 400, refused.body);
    assert.equal(refused.json?.error?.code, -32600, refused.body);
    assert.match(refused.json.error.message, /at most 64 messages/, refused.body);
    const ok = await post(srv, batch(64), { bearer: alice, sessionId, protocolVersion: "2025-03-26" });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(ok.json.length, 64);
    // The 4 MiB batch of tools/list calls builds no huge reply.
    const huge = Array.from({ length: 80_000 }, (_, i) => rpc("tools/list", undefined, i));
    const big = await post(srv, huge, { bearer: alice, sessionId, protocolVersion: "2025-03-26", timeoutMs: 30_000 });
    assert.equal(big.status, 400);
    assert.ok(big.body.length < 1024, `the refusal is short (${big.body.length} bytes)`);
    await request(srv.mcpUrl, { method: "DELETE", headers: { authorization: `Bearer ${alice}`, "mcp-session-id": sessionId } });
  });

  test("the 4th live session of one (account, org) → 429 naming the limit; others unaffected", async () => {
    // Sessions of the test above have gone idle by now.
    await sleep(IDLE_MS * 2 + 1000);
    const mine = [];
    for (let i = 0; i < 3; i++) mine.push((await initSession(srv, alice)).sessionId);
    const refused = await post(srv, rpc("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo }, 1), { bearer: alice });
    assert.equal(refused.status, 429, refused.body);
    assert.equal(refused.json?.error?.code, -32000, refused.body);
    assert.match(refused.json.error.message, /Too many live sessions for this account and org \(limit 3\)/);
    assert.equal(refused.headers["mcp-session-id"], undefined);
    // Another account, and the same account in another org, are not capped by alice's.
    await initSession(srv, bob);
    await initSession(srv, aliceOtherOrg);
    // Alice's live sessions still work.
    for (const sessionId of mine) {
      const res = await post(srv, rpc("ping"), { bearer: alice, sessionId, protocolVersion: "2025-06-18" });
      assert.equal(res.status, 200, res.body);
    }
    // Ended and idle sessions free their places.
    await request(srv.mcpUrl, { method: "DELETE", headers: { authorization: `Bearer ${alice}`, "mcp-session-id": mine[0] } });
    await waitUntil("a new session for alice", async () => {
      const res = await post(srv, rpc("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo }, 1), { bearer: alice });
      return res.status === 200;
    }, { ms: IDLE_MS * 3 + 5000, every: 250 });
  });

  test("a 3rd GET stream on one session → 429 naming the limit; a closed one frees its place", async () => {
    const { sessionId, protocolVersion } = await initSession(srv, bob);
    const first = await openGet(srv, { bearer: bob, sessionId, protocolVersion });
    const second = await openGet(srv, { bearer: bob, sessionId, protocolVersion });
    assert.equal(first.status, 200);
    assert.equal(second.status, 200);
    const third = await openGet(srv, { bearer: bob, sessionId, protocolVersion });
    const text = await drain(third);
    assert.equal(third.status, 429, text);
    assert.match(text, /Too many open GET streams on this session \(limit 2\)/);
    // The session itself is fine.
    const ping = await post(srv, rpc("ping"), { bearer: bob, sessionId, protocolVersion });
    assert.equal(ping.status, 200, ping.body);
    first.close();
    const again = await waitUntil("a GET stream after one closed", async () => {
      const st = await openGet(srv, { bearer: bob, sessionId, protocolVersion });
      if (st.status === 200) return st;
      await drain(st);
    }, { ms: 5000, every: 100 });
    again.close();
    second.close();
  });

  test("protected-resource metadata refuses a foreign Host and names the server by an allowed one", async () => {
    for (const path of ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]) {
      const evil = await request(`${srv.base}${path}`, { method: "GET", headers: { host: "evil.example" } });
      assert.equal(evil.status, 403, evil.body);
      assert.ok(!evil.body.includes("evil.example"), evil.body);
      const ok = await request(`${srv.base}${path}`, { method: "GET", headers: { host: `localhost:${srv.port}` } });
      assert.equal(ok.status, 200, ok.body);
      assert.equal(ok.json.resource, `http://localhost:${srv.port}/mcp`);
    }
  });

  test("/metrics needs the metrics token", async () => {
    const none = await request(`${srv.base}/metrics`, { method: "GET" });
    assert.equal(none.status, 401, none.body);
    const wrong = await request(`${srv.base}/metrics`, { method: "GET", headers: { authorization: "Bearer metrics-secre" } });
    assert.equal(wrong.status, 401, wrong.body);
    const mcpToken = await request(`${srv.base}/metrics`, { method: "GET", headers: { authorization: `Bearer ${alice}` } });
    assert.equal(mcpToken.status, 401, "an MCP bearer is not the metrics token");
    const ok = await request(`${srv.base}/metrics`, { method: "GET", headers: { authorization: "Bearer metrics-secret" } });
    assert.equal(ok.status, 200, ok.body);
    assert.match(ok.body, /executor_sessions_live/);
  });
});

// SPEC §12: with the store's writes backed up to their bound, a request
// that would only wait is answered 503 with Retry-After before anything
// runs; nothing already queued is lost, and the server recovers by itself.
// Another process holds the SQLite file's write lock, so the writer waits
// and its queue (one write, --max-queued-writes 1) fills.
test("a store whose writes are backed up answers 503 Retry-After, loses nothing, and recovers", { timeout: 60_000 }, async () => {
  const srv = await startServer({ store: "sqlite", args: ["--max-queued-writes", "1"] });
  try {
    const bearer = srv.mint("writes@limits.test");
    const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
    const execute = () => post(srv, rpc("tools/call", { name: "execute", arguments: { code: "return 41 + 1" } }), { bearer, sessionId, protocolVersion, timeoutMs: 30_000 });
    const locker = spawn("python3", ["-c", [
      "import sqlite3, sys, time",
      `c = sqlite3.connect(${JSON.stringify(join(srv.dataDir, "executor.db"))}, isolation_level=None, timeout=10)`,
      "c.execute('BEGIN EXCLUSIVE')",
      "print('locked', flush=True)",
      "sys.stdin.read()",
      "c.execute('COMMIT')",
    ].join("\n")], { stdio: ["pipe", "pipe", "inherit"] });
    await new Promise((resolve) => locker.stdout.once("data", resolve));
    // Two new sessions: one write waits in the writer, one in its queue. If
    // the second comes before the writer took the first off the queue, it
    // is refused (503) before anything is taken on; a write that was taken
    // on is never lost.
    const waiting = [0, 1].map(() => initSession(srv, bearer, "2025-11-25").then((s) => ({ s }), (err) => ({ err })));
    let busy;
    await waitUntil("the server answers 503 while the writes are backed up", async () => {
      busy = await post(srv, rpc("tools/call", { name: "execute", arguments: { code: "return 1" } }), { bearer, sessionId, protocolVersion, timeoutMs: 1000 }).catch(() => undefined);
      return busy?.status === 503;
    }, { ms: 5000, every: 100 });
    assert.equal(busy.headers["retry-after"], "1");
    assert.match(busy.body, /store has as many writes queued as it may; retry shortly/);
    const refusedInit = await post(srv, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo } }, { bearer });
    assert.equal(refusedInit.status, 503, refusedInit.body);
    locker.stdin.end();
    // The writes that waited are written, and the server serves again.
    const outcomes = await Promise.all(waiting);
    for (const { s, err } of outcomes) {
      // Refused up front (the queue full), or told the store did not
      // answer in time (SQLite's busy timeout on a loaded machine): a 503
      // either way, never a write said done and lost.
      if (err) assert.match(String(err), /initialize answered 503: /, "a waiting initialize either is refused with a 503 or succeeds");
      else assert.ok(s.sessionId, "a session that waited was created");
    }
    // A session said created was written: it serves.
    for (const { s } of outcomes.filter(({ s }) => s)) {
      const list = await post(srv, rpc("tools/list", {}), { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion });
      assert.equal(list.status, 200, list.body);
    }
    const later = await execute();
    assert.equal(later.status, 200, later.body);
    assert.match(later.body, /"result":42/);
  } finally {
    await srv.cleanup();
  }
});

// Issue 41 §5: what the store keeps of past work is bounded in bytes. Past
// --max-org-history-bytes the org's oldest execution records go, past
// --max-event-log-bytes the oldest delivered events; the newest stay, and
// the trim is logged and counted.
test("execution records and the event log are trimmed, oldest first, to their byte bounds", { timeout: 90_000 }, async () => {
  const RECORDS_BOUND = 100_000;
  const srv = await startServer({ args: ["--max-org-history-bytes", String(RECORDS_BOUND), "--max-event-log-bytes", "100000"] });
  try {
    const bearer = srv.mint("history@limits.test");
    const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
    const RUNS = 60;
    for (let i = 0; i < RUNS; i++) {
      // Answered on an SSE stream: each answer is an event in the log too.
      const res = await post(srv, rpc("tools/call", { name: "execute", arguments: { code: `return "${i}:" + "x".repeat(5000)` } }), { bearer, sessionId, protocolVersion });
      assert.equal(res.status, 200, res.body);
    }
    const metrics = async () => {
      const text = (await request(`${srv.base}/metrics`, { method: "GET" })).body;
      const value = (name) => Number(new RegExp(`^${name} (\\d+)`, "m").exec(text)?.[1] ?? NaN);
      return { records: value("executor_history_trimmed_records_total"), events: value("executor_history_trimmed_events_total") };
    };
    await waitUntil("the records and events trimmed", async () => {
      const m = await metrics();
      return m.records > 0 && m.events > 0;
    }, { ms: 30_000, every: 500 });
    const listed = await fetch(`${srv.base}/api/v1/executions?limit=100`, { headers: { authorization: `Bearer ${bearer}` } });
    assert.equal(listed.status, 200);
    const items = (await listed.json()).items;
    assert.ok(items.length > 0 && items.length < RUNS, `${items.length} records kept of ${RUNS}`);
    const details = await Promise.all(items.map(async (item) => (await fetch(`${srv.base}/api/v1/executions/${item.id}`, { headers: { authorization: `Bearer ${bearer}` } })).json()));
    const kept = details.map((d) => Number(String(d.result).split(":")[0])).sort((a, b) => a - b);
    assert.equal(kept.at(-1), RUNS - 1, "the newest record stays");
    assert.deepEqual(kept, Array.from({ length: kept.length }, (_, k) => RUNS - kept.length + k), "the oldest went first");
    assert.ok(kept.length * 5000 <= RECORDS_BOUND, `${kept.length} records of 5 KB kept: over the bound`);
    assert.match(srv.log, /held more execution records than its bound: the oldest were deleted/);
    assert.match(srv.log, /held more delivered SSE events than its bound/);
  } finally {
    await srv.cleanup();
  }
});

// Issue 41 §5: one session's event log is bounded in bytes too. Answers
// nobody read (each POST's client hung up before its answer) pile up in
// the log; past --max-session-event-bytes the oldest are replaced by an
// error answer to their request, so the client that comes back for them
// is told; the newest stay whole.
test("a session's event log over its bound tells the client which answers it dropped", { timeout: 90_000 }, async () => {
  const srv = await startServer({ args: ["--max-session-event-bytes", "250000"] });
  try {
    const bearer = srv.mint("eventlog@limits.test");
    const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
    const ids = [501, 502, 503, 504];
    for (const id of ids) {
      // The answer (about 130 KB) comes after the client went away.
      const st = await openStream(srv.mcpUrl, {
        method: "POST",
        headers: { ...mcpHeaders({ bearer, sessionId, protocolVersion }), "content-type": "application/json" },
        body: rpc("tools/call", { name: "execute", arguments: { code: `await new Promise((r) => setTimeout(r, 300)); return "${id}:" + "x".repeat(100000)` } }, id),
      });
      assert.equal(st.status, 200);
      st.close();
      await sleep(600);
    }
    const dropped = async () => {
      const text = (await request(`${srv.base}/metrics`, { method: "GET" })).body;
      return Number(/^executor_history_dropped_answers_total (\d+)/m.exec(text)?.[1] ?? 0);
    };
    await waitUntil("the session's oldest undelivered answers are replaced", async () => (await dropped()) >= 1, { ms: 30_000, every: 500 });
    assert.match(srv.log, /its oldest undelivered answers were replaced by error answers to their requests/);
    // The client comes back: every request has exactly one answer, the
    // oldest an error that says why, the newest whole.
    const get = await openGet(srv, { bearer, sessionId, protocolVersion });
    assert.equal(get.status, 200);
    const answers = new Map();
    await waitUntil("every request's answer arrives", () => {
      for (const e of get.events) {
        if (!e.data) continue;
        const m = JSON.parse(e.data);
        if (ids.includes(m.id)) answers.set(m.id, m);
      }
      return answers.size === ids.length;
    }, { ms: 10_000, every: 100 });
    get.close();
    const first = answers.get(501);
    assert.match(first.error?.message ?? "", /dropped before it was delivered: this session's event log was over its bound of 250000 bytes; run the request again/, JSON.stringify(first).slice(0, 300));
    const last = answers.get(504);
    assert.equal(last.error, undefined);
    assert.equal(last.result.structuredContent.result.slice(0, 4), "504:");
  } finally {
    await srv.cleanup();
  }
});
