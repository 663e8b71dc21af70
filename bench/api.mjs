// The management API's figures (issue 37), on each store: p50 and p99 of
// the list endpoints with 100,000 executions and 1,000,000 tool calls
// stored (target: p99 < 20 ms for a page of 50); cursors that stay stable
// while rows are inserted; and what an API client polling every 100 ms
// costs the MCP endpoint (target: MCP p99 within 10%). See bench/api.
//
// The rows are written with SQL straight into the store the server made
// (sqlite3, psql), in the shapes the store writes: each execution's record
// holds its calls' JSON, and each call is a row of `tool_calls` too.
// Latency is measured by wrk (a C client: it costs far less than the
// server), the pollers and cursor walks by this process (fetch).
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = new URL("..", import.meta.url).pathname;
const BIN = process.env.EXECUTOR_BIN ?? join(ROOT, "target/release/executor");
const env = (name, fallback) => process.env[name] ?? fallback;
const STORES = env("BENCH_STORES", "sqlite,postgres").split(",").filter(Boolean);
const PARTS = env("BENCH", "lists,cursors,mcp").split(",");
const MCP_STORES = env("MCP_STORES", STORES.join(",")).split(",");
const EXECUTIONS = Number(env("EXECUTIONS", 100_000));
const CALLS_PER = Number(env("CALLS_PER_EXECUTION", 10));
const DURATION = Number(env("DURATION", 10)); // s per list endpoint
const WARMUP = Number(env("WARMUP", 2)); // s of the same load before each
const CONNS = Number(env("CONNS", 4));
const THREADS = Number(env("THREADS", 2));
const LIMIT = Number(env("LIMIT", 50));
const WALK_LIMIT = Number(env("WALK_LIMIT", 200));
const WRITERS = Number(env("WRITERS", 2));
const ROUNDS = Number(env("ROUNDS", 5));
const MCP_DURATION = Number(env("MCP_DURATION", 6));
const MCP_CONNS = Number(env("MCP_CONNS", 8));
const POLL_MS = Number(env("POLL_MS", 100));
// What the poller asks each time, and what the control poller asks: a
// client as frequent whose requests cost the server next to nothing, so
// that the cost of the lists shows apart from that of a client's presence
// (on a machine the MCP load keeps busy, any process waking every 100 ms
// moves its p99). CONTROL_PATHS= (empty) leaves the control out.
const POLL_PATHS = env("POLL_PATHS", `/api/v1/executions?limit=${LIMIT},/api/v1/tool-calls?limit=${LIMIT}`).split(",");
const CONTROL_PATHS = env("CONTROL_PATHS", "/healthz,/healthz").split(",").filter(Boolean);
const TARGET_P99_MS = Number(env("TARGET_P99_MS", 20));
const TARGET_MCP_RATIO = Number(env("TARGET_MCP_RATIO", 1.1));
const PG_ADMIN = env("PG_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres");
const DAY = 86_400_000;
const SPAN = 30 * DAY;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});
const pct = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : NaN; };
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : "-");
const log = (...a) => console.error(...a); // progress on stderr, figures on stdout

// Everything made is undone on exit, a failed one too (servers, temp dirs,
// the Postgres database): each step registers its undoing, synchronous so
// that it runs in the 'exit' handler.
const undo = [];
const undoAll = () => { while (undo.length) { try { undo.pop()(); } catch {} } };
process.on("exit", undoAll);
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => process.exit(130));

const run = (cmd, args, { input, env: extra } = {}) => execFileSync(cmd, args, {
  encoding: "utf8", input, maxBuffer: 1 << 30, env: { ...process.env, RUST_LOG: "warn", PGOPTIONS: "-c client_min_messages=warning", ...extra },
});

// ---- the rows

// A well-mixed 0..999 from an integer expression (the same in both dialects).
const H = (x, salt) => `((((${x}) * 2654435761 + ${salt}) % 4294967296) / 4096 % 1000)`;
const TOOLS = [
  ["github.issues.list", '["owner","repo","state"]'], ["github.issues.get", '["issue_number","owner","repo"]'],
  ["github.issues.create", '["body","owner","repo","title"]'], ["github.pulls.list", '["owner","repo"]'],
  ["github.pulls.get", '["owner","pull_number","repo"]'], ["github.repos.get", '["owner","repo"]'],
  ["github.search.code", '["q"]'], ["slack.chat.postMessage", '["channel","text"]'],
  ["slack.conversations.history", '["channel","limit"]'], ["slack.users.info", '["user"]'],
  ["linear.issues.list", '["filter","first"]'], ["linear.issues.create", '["description","teamId","title"]'],
  ["stripe.customers.list", '["limit"]'], ["stripe.customers.retrieve", '["id"]'],
  ["stripe.invoices.list", '["customer","limit"]'], ["notion.pages.retrieve", '["page_id"]'],
  ["notion.databases.query", '["database_id","filter"]'], ["jira.issues.search", '["jql","maxResults"]'],
  ["pagerduty.incidents.list", '["statuses"]'], ["graph.me.messages.list", '["$top"]'],
];
const FILTER_TOOL = TOOLS[0][0];
const pick = (index, column) => `CASE ${index} ${TOOLS.map((t, i) => `WHEN ${i} THEN '${t[column]}'`).join(" ")} END`;

/** The seeding script: EXECUTIONS runs over the past 30 days (a third of
 * them sharing their time with a neighbour, so that the keyset's id
 * tie-break is walked too), CALLS_PER calls each. */
const seedSql = (dialect, { org, account, now }) => {
  const pg = dialect === "postgres";
  const hex = (x, w) => (pg ? `lpad(to_hex(${x}), ${w}, '0')` : `printf('%0${w}x', ${x})`);
  const nl = pg ? "chr(10)" : "char(10)";
  const step = Math.floor(SPAN / EXECUTIONS);
  const series = (n, col) => (pg
    ? `generate_series(0::bigint, ${n - 1}) AS ${col}`
    : `(WITH RECURSIVE q(${col}) AS (SELECT 0 UNION ALL SELECT ${col} + 1 FROM q WHERE ${col} < ${n - 1}) SELECT ${col} FROM q)`);
  const skel = `SELECT i,
      'exec_' || ${hex(`(i * 2654435761) % 4294967296`, 8)} || '-' || ${hex(`(i * 40503) % 65536`, 4)} || '-4' || ${hex(`(i * 7919) % 4096`, 3)}
        || '-' || ${hex(`32768 + (i * 31) % 16384`, 4)} || '-' || ${hex("i", 12)} AS id,
      ${now} - 120000 - (i - CASE WHEN i % 3 = 1 THEN 1 ELSE 0 END) * ${step} AS ts,
      ${H("i", 1)} AS h,
      CASE WHEN i % 10 = 9 THEN NULL ELSE 'ses_' || ${hex(`((i / 50) * 2654435761) % 281474976710656`, 12)} END AS sid
    FROM ${series(EXECUTIONS, "i")}${pg ? "" : " AS n"}`;
  const c = `(s.i * ${CALLS_PER} + k)`;
  const calls = `SELECT s.id AS eid, s.sid, s.ts, k, ${H(c, 7)} % ${TOOLS.length} AS tix, ${H(c, 99991)} AS ho, ${H(c, 31337)} AS ha, ${H(c, 5)} AS hj
    FROM skel s CROSS JOIN ${series(CALLS_PER, "k")}${pg ? "" : " AS ks"}`;
  const outcome = `CASE WHEN ho < 880 THEN 'ok' WHEN ho < 940 THEN 'failed' WHEN ho < 960 THEN 'blocked' WHEN ho < 970 THEN 'declined' WHEN ho < 980 THEN 'timed_out' ELSE 'error' END`;
  const errorCode = `CASE WHEN ho < 880 THEN NULL WHEN ho < 940 THEN 'upstream_http_error' WHEN ho < 960 THEN 'tool_blocked' WHEN ho < 970 THEN 'declined' WHEN ho < 980 THEN 'upstream_timeout' ELSE 'internal_error' END`;
  const asked = `((ho < 880 AND ha < 100) OR (ho >= 960 AND ho < 970))`; // calls that needed approval
  const action = `CASE WHEN ho >= 940 AND ho < 960 THEN 'block' WHEN ${asked} THEN 'require_approval' ELSE 'allow' END`;
  const rule = `CASE WHEN ho >= 940 AND ho < 960 THEN 'pol_block_' || (tix % 3) WHEN ${asked} THEN 'pol_approve_' || (tix % 4) ELSE NULL END`;
  const approval = `CASE WHEN ${asked} THEN (CASE WHEN ho < 880 THEN 'approved' ELSE 'declined' END) ELSE NULL END`;
  const decidedBy = `CASE WHEN ${asked} THEN '${account}' ELSE NULL END`;
  const wait = `CASE WHEN ${asked} THEN 2000 + ha * 97 ELSE 0 END`;
  const callCols = "id, org_id, execution_id, session_id, account_id, tool_path, outcome, error_code, policy_action, policy_rule, approval, decided_by, approval_wait_ms, arg_names, started_at, duration_ms";
  const callJson = pg
    ? `json_agg(json_build_object('id', t.id, 'org_id', t.org_id, 'execution_id', t.execution_id, 'session_id', t.session_id,
        'account_id', t.account_id, 'tool_path', t.tool_path, 'outcome', t.outcome, 'error_code', t.error_code,
        'policy_action', t.policy_action, 'policy_rule', t.policy_rule, 'approval', t.approval, 'decided_by', t.decided_by,
        'approval_wait_ms', t.approval_wait_ms, 'arg_names', t.arg_names::json, 'started_at_ms', t.started_at,
        'duration_ms', t.duration_ms) ORDER BY t.id)::text FROM tool_calls t WHERE t.execution_id = s.id`
    : `json_group_array(json_object('id', t.id, 'org_id', t.org_id, 'execution_id', t.execution_id, 'session_id', t.session_id,
        'account_id', t.account_id, 'tool_path', t.tool_path, 'outcome', t.outcome, 'error_code', t.error_code,
        'policy_action', t.policy_action, 'policy_rule', t.policy_rule, 'approval', t.approval, 'decided_by', t.decided_by,
        'approval_wait_ms', t.approval_wait_ms, 'arg_names', json(t.arg_names), 'started_at_ms', t.started_at,
        'duration_ms', t.duration_ms)) FROM (SELECT * FROM tool_calls WHERE execution_id = s.id ORDER BY id) t`;
  const status = `CASE WHEN h < 870 THEN 'completed' WHEN h < 990 THEN 'error' ELSE 'waiting_for_interaction' END`;
  const firstTool = pick(`(${H(`s.i * ${CALLS_PER}`, 7)} % ${TOOLS.length})`, 0);
  return `
${pg ? "SET synchronous_commit = off;" : "PRAGMA synchronous = OFF; PRAGMA cache_size = -400000; PRAGMA temp_store = MEMORY;"}
BEGIN;
CREATE TEMP TABLE skel AS ${skel};
INSERT INTO tool_calls (${callCols})
SELECT eid || '.' || k, '${org}', eid, sid, '${account}', ${pick("tix", 0)}, ${outcome}, ${errorCode}, ${action}, ${rule},
       ${approval}, ${decidedBy}, ${wait}, ${pick("tix", 1)}, ts + k * 40 + hj % 30, 5 + (hj * 7) % 400
FROM (${calls}) q ORDER BY eid, k;
INSERT INTO executions (id, session_id, account_id, org_id, code, status, result, error, logs, tool_calls, started_at, duration_ms)
SELECT s.id, s.sid, '${account}', '${org}',
       'const page = await tools.' || ${firstTool} || '({ owner: "acme", repo: "web", limit: ' || (s.h % 90 + 10) || ' });' || ${nl}
         || 'const rows = page.data?.items ?? [];' || ${nl} || 'return { count: rows.length, first: rows[0]?.id };',
       ${status},
       CASE WHEN s.h < 870 THEN '{"count":' || (s.h % 50) || ',"first":"it_' || s.i || '"}' ELSE NULL END,
       CASE WHEN s.h >= 870 AND s.h < 990 THEN 'TypeError: Cannot read properties of undefined (reading ''items'')' ELSE NULL END,
       CASE WHEN s.h % 4 = 0 THEN '[]' ELSE '["fetched ' || (s.h % 50) || ' rows","page 1 of ' || (s.h % 7 + 1) || '"]' END,
       (SELECT ${callJson}),
       s.ts, 40 + (s.h * 3) % 2500
FROM skel s ORDER BY s.id;
COMMIT;
`;
};

// ---- the stores

const sqlite = (db, sql) => run("sqlite3", ["-batch", "-bail", db], { input: sql });
const psql = (url, sql) => run("psql", [url, "-v", "ON_ERROR_STOP=1", "-qAt", "-f", "-"], { input: sql });

/** A server on the store `storeArgs` name: { base, stop(), stderr() }. */
const serve = async (storeArgs, extra) => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, ...storeArgs,
    "--api-rate", "1000000", "--api-burst", "1000000", "--execution-retention-days", "365"], {
    stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, RUST_LOG: "warn", ...extra },
  });
  let stderr = "";
  child.stderr.on("data", (d) => { if (stderr.length < 1e6) stderr += d; });
  undo.push(() => { if (child.exitCode === null) child.kill("SIGKILL"); });
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`server exited: ${stderr}`);
    try { if ((await fetch(`${base}/healthz`)).ok) break; } catch {}
    if (i > 300) throw new Error(`server not healthy: ${stderr}`);
    await sleep(100);
  }
  const stop = async () => {
    if (child.exitCode !== null) return;
    child.kill("SIGTERM");
    await Promise.race([new Promise((r) => child.once("exit", r)), sleep(5000)]);
    if (child.exitCode === null) child.kill("SIGKILL");
  };
  return { base, stop, stderr: () => stderr };
};

/** A store with its seeded rows and a server on it. */
const setUp = async (store) => {
  const dataDir = mkdtempSync(join(tmpdir(), `executor-bench-api-${store}-`));
  undo.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const extra = {};
  let dbUrl = null;
  let query;
  if (store === "postgres") {
    const name = `executor_bench_api_${process.pid}`;
    psql(PG_ADMIN, `DROP DATABASE IF EXISTS ${name}; CREATE DATABASE ${name};`);
    undo.push(() => psql(PG_ADMIN, `DROP DATABASE IF EXISTS ${name} WITH (FORCE);`));
    const u = new URL(PG_ADMIN);
    u.pathname = `/${name}`;
    dbUrl = u.toString();
    extra.EXECUTOR_SECRET_KEY = process.env.EXECUTOR_SECRET_KEY ?? "11".repeat(32);
    query = (sql) => psql(dbUrl, sql);
  } else {
    query = (sql) => sqlite(join(dataDir, "executor.db"), sql);
  }
  const storeArgs = ["--data-dir", dataDir, ...(dbUrl ? ["--database-url", dbUrl] : [])];
  // The CLI makes the schema, the account, its org and the token.
  const minted = run(BIN, ["token", "create", "--email", "bench@example.com", ...storeArgs], { env: extra });
  const token = (minted.match(/exk_[A-Za-z0-9_-]+/) ?? [minted.trim().split("\n").pop()])[0].trim();
  const [account, org] = query("SELECT account_id || '|' || org_id FROM tokens LIMIT 1;").trim().split("|");

  // Secondary keyset indexes are built after the rows (sorted once, as
  // CREATE INDEX does, rather than row by row); the primary keys and
  // tool_calls_execution take the rows in their own order.
  const indexes = store === "postgres"
    ? query(`SELECT indexname || '|' || indexdef FROM pg_indexes WHERE tablename IN ('executions', 'tool_calls')
               AND indexname NOT LIKE '%_pkey' AND indexname <> 'tool_calls_execution';`)
    : query(`SELECT name || '|' || replace(sql, char(10), ' ') FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('executions', 'tool_calls')
               AND sql IS NOT NULL AND name <> 'tool_calls_execution';`);
  const defs = indexes.trim().split("\n").filter(Boolean).map((l) => { const i = l.indexOf("|"); return [l.slice(0, i), l.slice(i + 1)]; });
  const now = Date.now();
  const t0 = performance.now();
  log(`${store}: seeding ${EXECUTIONS} executions, ${EXECUTIONS * CALLS_PER} tool calls ...`);
  query(defs.map(([name]) => `DROP INDEX ${name};`).join("\n"));
  query(seedSql(store, { org, account, now }));
  // ANALYZE on Postgres only: autovacuum would analyze tables this size
  // within a minute; the SQLite store never runs ANALYZE, so its planner
  // goes without statistics in service too.
  query(defs.map(([, def]) => `${def};`).join("\n") + (store === "postgres" ? "\nANALYZE executions; ANALYZE tool_calls;" : ""));
  const counted = query(`SELECT (SELECT count(*) FROM executions) || '|' || (SELECT count(*) FROM tool_calls);`).trim();
  const seedSeconds = (performance.now() - t0) / 1000;
  const size = store === "postgres"
    ? `${(Number(query(`SELECT pg_database_size(current_database());`)) / 1e6).toFixed(0)} MB`
    : `${(Number(query(`SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size();`)) / 1e6).toFixed(0)} MB`;
  log(`${store}: seeded (executions|tool calls) ${counted} in ${seedSeconds.toFixed(1)} s, ${size}`);

  const { base, stop, stderr } = await serve(storeArgs, extra);
  return { store, base, token, org, account, now, query, seedSeconds, size, stop, stderr, dataDir, dbUrl, extra, storeArgs };
};

/** GET an API path as JSON; throws on a non-200. */
const api = async (t, path) => {
  const res = await fetch(`${t.base}/api/v1${path}`, { headers: { authorization: `Bearer ${t.token}` } });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${body.slice(0, 300)}`);
  return JSON.parse(body);
};

// ---- wrk

const lua = (s) => `[==[${s}]==]`;
const wrkMs = (v, unit) => Number(v) * ({ us: 1e-3, ms: 1, s: 1e3 }[unit] ?? NaN);
/** One wrk run (asynchronous: the pollers of this process keep running). */
const wrk = ({ url, headers, method = "GET", body, seconds, conns = CONNS, threads = THREADS }) => new Promise((resolve, reject) => {
  const dir = mkdtempSync(join(tmpdir(), "bench-api-wrk-"));
  const script = [`wrk.method = "${method}"`, ...(body ? [`wrk.body = ${lua(body)}`] : []),
    ...Object.entries(headers).map(([k, v]) => `wrk.headers[ ${lua(k)} ] = ${lua(v)}`)].join("\n");
  writeFileSync(join(dir, "req.lua"), script);
  const p = spawn("wrk", [`-t${Math.min(threads, conns)}`, `-c${conns}`, `-d${seconds}s`, "--latency", "-s", join(dir, "req.lua"), url]);
  undo.push(() => { if (p.exitCode === null) p.kill("SIGKILL"); });
  let out = "", err = "";
  p.stdout.on("data", (d) => (out += d));
  p.stderr.on("data", (d) => (err += d));
  p.on("exit", (code) => {
    rmSync(dir, { recursive: true, force: true });
    if (code !== 0) return reject(new Error(`wrk failed: ${err}`));
    const at = (q) => { const m = out.match(new RegExp(`^\\s+${q}%\\s+([\\d.]+)(us|ms|s)`, "m")); return m ? wrkMs(m[1], m[2]) : NaN; };
    const non2xx = Number(out.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0);
    const sock = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/);
    const errors = non2xx + (sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0);
    resolve({ p50: at(50), p90: at(90), p99: at(99), rps: Number(out.match(/Requests\/sec:\s+([\d.]+)/)?.[1]), errors });
  });
});

// ---- 1. the list endpoints

const lists = async (t) => {
  const mid = t.now - Math.floor(SPAN / 2);
  const deep = async (path) => {
    const page = await api(t, `${path}?limit=${LIMIT}&until=${mid}`);
    if (!page.next_cursor) throw new Error(`${path}: no cursor half way back`);
    return `${path}?limit=${LIMIT}&cursor=${page.next_cursor}`;
  };
  const endpoints = [
    ["executions, first page", `/executions?limit=${LIMIT}`],
    ["executions, a page 15 days back (cursor)", await deep("/executions")],
    ["executions, status=error (12%)", `/executions?limit=${LIMIT}&status=error`],
    ["executions, status=waiting_for_interaction (1%)", `/executions?limit=${LIMIT}&status=waiting_for_interaction`],
    ["tool-calls, first page", `/tool-calls?limit=${LIMIT}`],
    ["tool-calls, a page 15 days back (cursor)", await deep("/tool-calls")],
    [`tool-calls, tool=${FILTER_TOOL} (5%)`, `/tool-calls?limit=${LIMIT}&tool=${FILTER_TOOL}`],
    ["tool-calls, tool=github. (prefix, 35%)", `/tool-calls?limit=${LIMIT}&tool=github.`],
    ["tool-calls, outcome=failed (6%)", `/tool-calls?limit=${LIMIT}&outcome=failed`],
  ];
  const rows = [];
  for (const [name, path] of endpoints) {
    const page = await api(t, path);
    if (page.items.length === 0) throw new Error(`${path}: no items`);
    if (page.items.length < LIMIT) log(`${t.store}: ${path}: only ${page.items.length} items`);
    const load = { url: `${t.base}/api/v1${path}`, headers: { authorization: `Bearer ${t.token}` } };
    if (WARMUP > 0) await wrk({ ...load, seconds: WARMUP });
    const r = await wrk({ ...load, seconds: DURATION });
    if (r.errors) throw new Error(`${path}: ${r.errors} failed requests`);
    log(`${t.store}: ${name}: p50 ${f2(r.p50)} ms, p99 ${f2(r.p99)} ms, ${r.rps.toFixed(0)} req/s`);
    rows.push({ store: t.store, name, path, ...r });
  }
  return rows;
};

// ---- 2. cursors under inserts

/** Runs `code` through POST /executions in `n` loops until stopped. */
const writers = (t, n) => {
  let stopped = false, written = 0, failed = "";
  const code = `await tools.search({ query: "issues" }); await tools.search({ query: "pull requests" }); return 1;`;
  const loop = async () => {
    while (!stopped) {
      const res = await fetch(`${t.base}/api/v1/executions`, {
        method: "POST", headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json" }, body: JSON.stringify({ code }),
      });
      const body = await res.text();
      if (res.status === 200) written++; else failed ||= `${res.status} ${body.slice(0, 300)}`;
    }
  };
  const loops = Array.from({ length: n }, loop);
  return { written: () => written, stop: async () => { stopped = true; await Promise.all(loops); if (failed) throw new Error(`writer: ${failed}`); } };
};

/** Walks every page of `path` (a query without limit and cursor). */
const walk = async (t, path) => {
  const seen = new Map();
  let cursor = null, pages = 0;
  do {
    const page = await api(t, `${path}${path.includes("?") ? "&" : "?"}limit=${WALK_LIMIT}${cursor ? `&cursor=${cursor}` : ""}`);
    for (const item of page.items) seen.set(item.id, (seen.get(item.id) ?? 0) + 1);
    pages++;
    cursor = page.next_cursor;
  } while (cursor);
  return { seen, pages };
};

const cursors = async (t) => {
  const since = t.now - 3 * DAY;
  const lists = [
    ["executions", "/executions", `SELECT id FROM executions WHERE org_id = '${t.org}';`],
    ["tool-calls since 3 days", `/tool-calls?since=${since}`, `SELECT id FROM tool_calls WHERE org_id = '${t.org}' AND started_at >= ${since};`],
  ];
  const results = [];
  const w = writers(t, WRITERS);
  try {
    await sleep(300);
    for (const [name, path, sql] of lists) {
      // What existed when the walk began; rows inserted after may or may
      // not be seen (they land at the head), never twice.
      const before = new Set(t.query(sql).split("\n").filter(Boolean));
      const written0 = w.written();
      const t0 = performance.now();
      const { seen, pages } = await walk(t, path);
      const seconds = (performance.now() - t0) / 1000;
      const duplicates = [...seen.values()].filter((n) => n > 1).length;
      const missing = [...before].filter((id) => !seen.has(id)).length;
      const fresh = [...seen.keys()].filter((id) => !before.has(id)).length;
      const r = { store: t.store, name, rows: seen.size, existed: before.size, pages, seconds, duplicates, missing, fresh, inserted: w.written() - written0 };
      log(`${t.store}: cursor walk ${name}: ${r.rows} rows, ${duplicates} duplicates, ${missing} missing`);
      results.push(r);
    }
  } finally {
    await w.stop();
  }
  for (const r of results) if (r.inserted === 0) throw new Error(`${r.name}: no execution was inserted during the walk`);
  return results;
};

// ---- 3. MCP p99 beside an API poller

const mcpHeaders = (t, sid) => ({
  authorization: `Bearer ${t.token}`, "content-type": "application/json",
  accept: "application/json, text/event-stream", ...(sid ? { "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" } : {}),
});

const poller = (t, paths) => {
  let stopped = false;
  const latencies = [];
  let failed = "";
  const loop = (async () => {
    while (!stopped) {
      const t0 = performance.now();
      for (const path of paths) {
        const s = performance.now();
        try {
          const res = await fetch(`${t.base}${path}`, { headers: { authorization: `Bearer ${t.token}` } });
          await res.arrayBuffer();
          if (res.status !== 200) throw new Error(`GET ${path}: ${res.status}`);
          latencies.push(performance.now() - s);
        } catch (e) { failed ||= String(e); }
      }
      await sleep(Math.max(0, POLL_MS - (performance.now() - t0)));
    }
  })();
  return { stop: async () => { stopped = true; await loop; if (failed) throw new Error(`poller: ${failed}`); return latencies; } };
};

const mcp = async (t) => {
  const init = await fetch(`${t.base}/mcp`, {
    method: "POST", headers: mcpHeaders(t),
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench-api", version: "1" } } }),
  });
  await init.text();
  const sid = init.headers.get("mcp-session-id");
  if (!sid) throw new Error(`initialize: ${init.status}, no session`);
  await (await fetch(`${t.base}/mcp`, { method: "POST", headers: mcpHeaders(t, sid), body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).text();
  const body = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" });
  const probe = await (await fetch(`${t.base}/mcp`, { method: "POST", headers: mcpHeaders(t, sid), body })).text();
  if (!probe.includes('"tools"')) throw new Error(`tools/list: ${probe.slice(0, 300)}`);
  const load = { url: `${t.base}/mcp`, method: "POST", body, headers: mcpHeaders(t, sid), conns: MCP_CONNS, threads: 1 };
  if (WARMUP > 0) await wrk({ ...load, seconds: WARMUP });
  // Each round runs every arm once, in an order that turns from round to round.
  const arms = [["without", null], ["with", POLL_PATHS], ...(CONTROL_PATHS.length ? [["control", CONTROL_PATHS]] : [])];
  const rounds = [];
  for (let i = 0; i < ROUNDS; i++) {
    const round = {};
    for (let j = 0; j < arms.length; j++) {
      const [arm, paths] = arms[(i + j) % arms.length];
      const p = paths ? poller(t, paths) : null;
      const r = await wrk({ ...load, seconds: MCP_DURATION });
      const polls = p ? await p.stop() : null;
      if (r.errors) throw new Error(`MCP load: ${r.errors} failed requests`);
      round[arm] = { ...r, polls };
    }
    round.ratio = round.with.p99 / round.without.p99;
    round.controlRatio = round.control ? round.control.p99 / round.without.p99 : NaN;
    log(`${t.store}: MCP round ${i + 1}: p99 without ${f2(round.without.p99)} ms, with ${f2(round.with.p99)} ms (x${round.ratio.toFixed(3)})` +
      (round.control ? `, control ${f2(round.control.p99)} ms (x${round.controlRatio.toFixed(3)})` : ""));
    rounds.push(round);
  }
  const polls = rounds.flatMap((r) => r.with.polls);
  return {
    store: t.store, rounds, ratio: median(rounds.map((r) => r.ratio)), controlRatio: median(rounds.map((r) => r.controlRatio)),
    pollP50: pct(polls, 0.5), pollP99: pct(polls, 0.99), polls: polls.length,
  };
};

// ---- 4. the console's pages (issue 39)

/** A console session on `t`: a login link redeemed, its cookie. */
const consoleCookie = async (t) => {
  const storeArgs = ["--data-dir", t.dataDir, ...(t.dbUrl ? ["--database-url", t.dbUrl] : [])];
  const link = run(BIN, ["console", "login-link", "--email", "bench@example.com", "--public-url", t.base, ...storeArgs], { env: t.extra }).trim();
  const page = await (await fetch(link)).text();
  const fields = Object.fromEntries([...page.matchAll(/<input type=hidden name="([^"]*)" value="([^"]*)">/g)].map((m) => [m[1], m[2].replace(/&amp;/g, "&")]));
  const res = await fetch(`${t.base}/console/login`, {
    method: "POST", redirect: "manual", body: new URLSearchParams(fields),
    headers: { "content-type": "application/x-www-form-urlencoded", origin: t.base },
  });
  const cookie = res.headers.getSetCookie().map((c) => c.split(";")[0]).find((c) => c.includes("executor_session"));
  if (!cookie) throw new Error(`console sign-in: ${res.status}`);
  return cookie;
};

const consolePages = async (t) => {
  const cookie = await consoleCookie(t);
  const get = async (path) => {
    const res = await fetch(`${t.base}${path}`, { headers: { cookie } });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${body.slice(0, 300)}`);
    return body;
  };
  const first = await get("/console/executions");
  const id = first.match(/\/console\/executions\/(exec_[^"]+)"/)?.[1];
  if (!id) throw new Error("no execution on the console's first page");
  // The stylesheet and the script every page loads (cached after the first).
  const assets = [...first.matchAll(/(?:href|src)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]);
  let assetBytes = 0;
  for (const a of assets) assetBytes += Buffer.byteLength(await (await fetch(`${t.base}${a}`)).text());
  const pages = [
    ["Integrations", "/console/integrations"],
    ["Policies", "/console/policies"],
    ["Approvals", "/console/approvals"],
    ["Executions, first page", "/console/executions"],
    ["Executions, status=error", "/console/executions?status=error"],
    ["Execution detail (10 tool calls)", `/console/executions/${id}`],
    ["Activity, first page", "/console/activity"],
    [`Activity, tool=github. (prefix)`, "/console/activity?tool=github."],
    ["Clients", "/console/clients"],
    ["Connect a client", "/console/connect"],
  ];
  const rows = [];
  for (const [name, path] of pages) {
    const html = Buffer.byteLength(await get(path));
    const load = { url: `${t.base}${path}`, headers: { cookie } };
    if (WARMUP > 0) await wrk({ ...load, seconds: WARMUP });
    const r = await wrk({ ...load, seconds: DURATION });
    if (r.errors) throw new Error(`${path}: ${r.errors} failed requests`);
    log(`${t.store}: console ${name}: p50 ${f2(r.p50)} ms, p90 ${f2(r.p90)} ms, p99 ${f2(r.p99)} ms, ${html} B of HTML`);
    rows.push({ store: t.store, name, path, html, weight: html + assetBytes, ...r });
  }
  return rows;
};

// ---- 5. a paused call to the open Approvals page (issue 39)

const LATENCY_TRIALS = Number(env("LATENCY_TRIALS", 10));
const TARGET_APPEAR_MS = Number(env("TARGET_APPEAR_MS", 1000));

/** The events of a console live stream: waitFor(pred) resolves with the first event's time whose data passes. */
const liveStream = async (base, cookie) => {
  const controller = new AbortController();
  const res = await fetch(`${base}/console/approvals/live`, { headers: { cookie }, signal: controller.signal });
  if (res.status !== 200) throw new Error(`live stream: ${res.status}`);
  const waiters = [];
  let last = null;
  (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk, { stream: true });
        let at;
        while ((at = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
          if (!data) continue;
          last = { data, at: performance.now() };
          for (const w of [...waiters]) if (w.pred(data)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(last.at); }
        }
      }
    } catch {}
  })();
  return {
    waitFor: (pred, ms = 10_000) => new Promise((resolve, reject) => {
      if (last && pred(last.data)) return resolve(last.at);
      const w = { pred, resolve };
      waiters.push(w);
      setTimeout(() => { const i = waiters.indexOf(w); if (i >= 0) { waiters.splice(i, 1); reject(new Error("no such live event in time")); } }, ms);
    }),
    close: () => controller.abort(),
  };
};

const approvalLatency = async (t) => {
  const cookie = await consoleCookie(t);
  const gated = "executor.coreTools.connections.list";
  const rule = await fetch(`${t.base}/api/v1/policies`, {
    method: "POST", headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json" },
    body: JSON.stringify({ pattern: gated, action: "require_approval", position: 0 }),
  });
  if (rule.status !== 201) throw new Error(`policy: ${rule.status} ${await rule.text()}`);
  const peer = await serve(t.storeArgs, t.extra);
  const init = await fetch(`${t.base}/mcp`, {
    method: "POST", headers: mcpHeaders(t),
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench-console", version: "1" } } }),
  });
  await init.text();
  const sid = init.headers.get("mcp-session-id");
  await (await fetch(`${t.base}/mcp`, { method: "POST", headers: mcpHeaders(t, sid), body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).text();
  const rows = [];
  try {
    for (const [where, base] of [["the same node", t.base], ["another node", peer.base]]) {
      const live = await liveStream(base, cookie);
      await live.waitFor(() => true);
      const times = [];
      for (let i = 0; i < LATENCY_TRIALS; i++) {
        const body = JSON.stringify({ jsonrpc: "2.0", id: 10 + i, method: "tools/call", params: { name: "execute", arguments: { code: `return await tools.${gated}({});` } } });
        const res = await fetch(`${t.base}/mcp`, { method: "POST", headers: mcpHeaders(t, sid), body });
        const text = await res.text();
        const paused = performance.now();
        const id = text.match(/exec_[0-9a-f-]{36}/)?.[0];
        if (!id) throw new Error(`execute did not pause: ${text.slice(0, 300)}`);
        const seen = await live.waitFor((data) => data.includes(id));
        times.push(Math.max(0, seen - paused));
        const decided = await fetch(`${t.base}/api/v1/executions/${id}/resume`, {
          method: "POST", headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json" }, body: JSON.stringify({ action: "decline" }),
        });
        await decided.text();
        await live.waitFor((data) => !data.includes(id));
        await sleep(137); // trials start at different points of the poll
      }
      live.close();
      const row = { store: t.store, where, p50: pct(times, 0.5), max: Math.max(...times), trials: times.length };
      log(`${t.store}: paused call to the open Approvals page on ${where}: p50 ${f2(row.p50)} ms, max ${f2(row.max)} ms`);
      rows.push(row);
    }
  } finally {
    await peer.stop();
  }
  return rows;
};

// ---- the run

if (!PARTS.some((p) => ["lists", "cursors", "mcp", "console"].includes(p))) throw new Error(`BENCH=${PARTS}: lists, cursors, mcp, console`);
const listRows = [], walks = [], mcps = [], seeds = [], consoleRows = [], latencyRows = [];
const loadAtStart = loadavg()[0];
for (const store of STORES) {
  const t = await setUp(store);
  seeds.push(t);
  if (PARTS.includes("lists")) listRows.push(...(await lists(t)));
  if (PARTS.includes("console")) consoleRows.push(...(await consolePages(t)));
  if (PARTS.includes("console")) latencyRows.push(...(await approvalLatency(t)));
  if (PARTS.includes("mcp") && MCP_STORES.includes(store)) mcps.push(await mcp(t));
  // Last: the walk's writers add rows.
  if (PARTS.includes("cursors")) walks.push(...(await cursors(t)));
  await t.stop();
  undoAll(); // this store's server, data dir and database
}

const [e, c] = [EXECUTIONS.toLocaleString("en-US"), (EXECUTIONS * CALLS_PER).toLocaleString("en-US")];
console.log(`\nManagement API lists: ${e} executions and ${c} tool calls stored in one org (past 30 days, ${CALLS_PER} calls per execution)`);
for (const t of seeds) console.log(`  ${t.store}: seeded in ${t.seedSeconds.toFixed(0)} s, ${t.size}`);
console.log(`  load average (1 min) at the start ${loadAtStart.toFixed(2)}, at the end ${loadavg()[0].toFixed(2)} (${cpus().length} cores shared by the client, the server and Postgres)`);
const failures = [];
if (listRows.length) {
  console.log(`\nwrk, ${THREADS} threads, ${CONNS} connections, ${DURATION} s per row (after ${WARMUP} s of warm-up); pages of ${LIMIT}`);
  console.log(`${"store".padEnd(9)}${"endpoint".padEnd(50)}${"p50 ms".padStart(8)}${"p99 ms".padStart(9)}${"req/s".padStart(8)}   p99 < ${TARGET_P99_MS} ms`);
  for (const r of listRows) {
    const ok = r.p99 < TARGET_P99_MS;
    if (!ok) failures.push(`${r.store} ${r.name}: p99 ${f2(r.p99)} ms`);
    console.log(`${r.store.padEnd(9)}${r.name.padEnd(50)}${f2(r.p50).padStart(8)}${f2(r.p99).padStart(9)}${r.rps.toFixed(0).padStart(8)}   ${ok ? "yes" : "NO"}`);
  }
}
const TARGET_PAGE_MS = Number(env("TARGET_PAGE_MS", 50));
const TARGET_PAGE_BYTES = Number(env("TARGET_PAGE_BYTES", 100_000));
if (consoleRows.length) {
  console.log(`\nConsole pages, signed in (cookie), same load as above; weight = the page's HTML + the stylesheet and the script, uncompressed`);
  console.log(`${"store".padEnd(9)}${"page".padEnd(36)}${"p50 ms".padStart(8)}${"p90 ms".padStart(8)}${"p99 ms".padStart(9)}${"req/s".padStart(8)}${"weight B".padStart(10)}   p99 < ${TARGET_PAGE_MS} ms, < ${TARGET_PAGE_BYTES / 1000} kB`);
  for (const r of consoleRows) {
    const ok = r.p99 < TARGET_PAGE_MS && r.weight < TARGET_PAGE_BYTES;
    if (!ok) failures.push(`${r.store} console ${r.name}: p99 ${f2(r.p99)} ms, ${r.weight} B`);
    console.log(`${r.store.padEnd(9)}${r.name.padEnd(36)}${f2(r.p50).padStart(8)}${f2(r.p90).padStart(8)}${f2(r.p99).padStart(9)}${r.rps.toFixed(0).padStart(8)}${String(r.weight).padStart(10)}   ${ok ? "yes" : "NO"}`);
  }
}
if (latencyRows.length) {
  console.log(`\nFrom an agent's paused call to its card in an open Approvals page (the page's live stream), ${LATENCY_TRIALS} trials`);
  for (const r of latencyRows) {
    const ok = r.max < TARGET_APPEAR_MS;
    if (!ok) failures.push(`${r.store} approvals on ${r.where}: max ${f2(r.max)} ms`);
    console.log(`${r.store.padEnd(9)}${`page served by ${r.where}`.padEnd(36)}p50 ${f2(r.p50).padStart(8)} ms   max ${f2(r.max).padStart(8)} ms   max < ${TARGET_APPEAR_MS} ms: ${ok ? "yes" : "NO"}`);
  }
}
if (walks.length) {
  console.log(`\nCursor walks, pages of ${WALK_LIMIT}, while ${WRITERS} writers run code through POST /api/v1/executions (an execution and 2 tool calls each)`);
  for (const r of walks) {
    if (r.duplicates || r.missing) failures.push(`${r.store} cursor walk ${r.name}: ${r.duplicates} duplicates, ${r.missing} missing`);
    console.log(`${r.store.padEnd(9)}cursor walk ${r.name}: ${r.rows} rows, ${r.duplicates} duplicates, ${r.missing} missing` +
      ` (${r.existed} existed at its start, ${r.fresh} inserted during it seen; ${r.inserted} executions inserted meanwhile; ${r.pages} pages in ${r.seconds.toFixed(1)} s)`);
  }
}
if (mcps.length) {
  console.log(`\nMCP tools/list under wrk (1 thread, ${MCP_CONNS} connections, ${MCP_DURATION} s a run), ${ROUNDS} rounds, each without and with an API client` +
    ` polling ${POLL_PATHS.map((p) => `GET ${p}`).join(" and ")} every ${POLL_MS} ms` +
    (CONTROL_PATHS.length ? `, and with a control client as frequent (${CONTROL_PATHS.map((p) => `GET ${p}`).join(" and ")})` : "") + ", in turning order");
  for (const m of mcps) {
    const ok = m.ratio <= TARGET_MCP_RATIO;
    if (!ok) failures.push(`${m.store} MCP p99 with/without x${m.ratio.toFixed(3)}`);
    const has = (arm) => m.rounds[0][arm];
    const each = (arm, key, fmt) => m.rounds.map((r) => fmt(r[arm][key])).join(", ");
    console.log(`${m.store.padEnd(9)}p99 ms without: ${each("without", "p99", f2)}; with: ${each("with", "p99", f2)}` + (has("control") ? `; control: ${each("control", "p99", f2)}` : ""));
    console.log(`${"".padEnd(9)}req/s without: ${each("without", "rps", (x) => x.toFixed(0))}; with: ${each("with", "rps", (x) => x.toFixed(0))}` +
      (has("control") ? `; control: ${each("control", "rps", (x) => x.toFixed(0))}` : ""));
    console.log(`${"".padEnd(9)}median p99 ratio with/without x${m.ratio.toFixed(3)} (rounds ${m.rounds.map((r) => r.ratio.toFixed(3)).join(", ")}): ${ok ? "within" : "NOT within"} ${((TARGET_MCP_RATIO - 1) * 100).toFixed(0)}%;` +
      ` the poller's requests under that load: p50 ${f2(m.pollP50)} ms, p99 ${f2(m.pollP99)} ms (${m.polls})`);
    if (has("control")) {
      const own = median(m.rounds.map((r) => r.with.p99 / r.control.p99));
      console.log(`${"".padEnd(9)}control/without x${m.controlRatio.toFixed(3)} (rounds ${m.rounds.map((r) => r.controlRatio.toFixed(3)).join(", ")}); with/control x${own.toFixed(3)}: the lists' own share`);
    }
  }
}
console.log(`\nbench/api: ${failures.length ? "MISSED: " + failures.join("; ") : "every target met"}`);
process.exit(failures.length ? 1 : 0);
