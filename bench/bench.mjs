// The project's benchmark: figures of the release binary on this machine.
// Prints one line per figure. Usage (from the project root, after
// `cargo build --release`):  bench/run     (DURATION=5 CONNS=16 SESSIONS=2000)
// BENCH_STORE=postgres runs the server on a PostgreSQL database of its own
// (created from EXECUTOR_TEST_POSTGRES, default the machine's server, and
// dropped at the end) instead of the embedded SQLite store.
import autocannon from "autocannon";
import { spawn, spawnSync, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import net from "node:net";
import { randomBytes } from "node:crypto";

const ROOT = new URL("..", import.meta.url).pathname;
const BIN = process.env.EXECUTOR_BIN ?? join(ROOT, "target/release/executor");
const DURATION = Number(process.env.DURATION ?? 5);
const CONNS = Number(process.env.CONNS ?? 16);
const SESSIONS = Number(process.env.SESSIONS ?? 2000);
const IDLE_MS = 1500;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});
const rssKb = (pid) => Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]);
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };

const dataDir = mkdtempSync(join(tmpdir(), "executor-bench-"));
// The store: SQLite in the data dir, or a Postgres database made for this run.
const PG_ADMIN = process.env.EXECUTOR_TEST_POSTGRES || "postgres://postgres@127.0.0.1:5432/postgres";
const pgName = process.env.BENCH_STORE === "postgres" ? `executor_bench_${process.pid}` : null;
const psql = (sql) => execFileSync("psql", [PG_ADMIN, "-qtAc", sql]);
if (pgName) {
  psql(`CREATE DATABASE ${pgName}`);
  const url = new URL(PG_ADMIN);
  url.pathname = `/${pgName}`;
  process.env.EXECUTOR_DATABASE_URL = url.toString();
  process.env.EXECUTOR_SECRET_KEY = randomBytes(32).toString("hex");
}
console.log(`store: ${pgName ? `postgres (${pgName})` : "sqlite"}`);
const port = await freePort();
const url = `http://127.0.0.1:${port}/mcp`;
const child = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--session-idle-timeout", String(IDLE_MS), "--allow-local-network"], {
  // The memory figure opens SESSIONS sessions for one account: above the
  // per-account cap (1,000 live) the server answers 429, and a refused
  // session would count as a session that costs nothing.
  stdio: ["ignore", "ignore", "inherit"],
  env: { EXECUTOR_MAX_SESSIONS_PER_PRINCIPAL: String(SESSIONS * 2), ...process.env, RUST_LOG: "warn" },
});
for (let i = 0; i < 100; i++) { try { if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break; } catch {} await sleep(50); }
const bearer = execFileSync(BIN, ["token", "create", "--email", "bench@example.com", "--data-dir", dataDir], { encoding: "utf8" }).trim();

const headers = (sid) => ({
  authorization: `Bearer ${bearer}`, "content-type": "application/json",
  accept: "application/json, text/event-stream", ...(sid ? { "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" } : {}),
});
const post = async (sid, body) => {
  const r = await fetch(url, { method: "POST", headers: headers(sid), body: JSON.stringify(body) });
  await r.text();
  return r;
};
const init = async () => {
  const r = await post(null, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "1" } } });
  const sid = r.headers.get("mcp-session-id");
  if (!sid) throw new Error(`initialize answered ${r.status} without a session`);
  return sid;
};
const load = (sid, body) => new Promise((resolve, reject) =>
  autocannon({ url, method: "POST", connections: CONNS, duration: DURATION, headers: headers(sid), body: JSON.stringify(body) },
    (err, res) => (err ? reject(err) : resolve(res))));
const line = (label, value, unit) => console.log(`${label.padEnd(44)} ${String(value).padStart(10)} ${unit}`);

try {
  const sid = await init();
  const tl = await load(sid, { jsonrpc: "2.0", id: 2, method: "tools/list" });
  line(`tools/list req/s (${CONNS} conns)`, tl.requests.average.toFixed(0), `req/s  p50 ${tl.latency.p50} ms p99 ${tl.latency.p99} ms errors ${tl.errors + tl.non2xx}`);
  const ex = await load(sid, { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "execute", arguments: { code: "return 1;" } } });
  line(`execute "return 1;" req/s (${CONNS} conns)`, ex.requests.average.toFixed(0), `req/s  p50 ${ex.latency.p50} ms p99 ${ex.latency.p99} ms errors ${ex.errors + ex.non2xx}`);

  const n = 300, t0 = performance.now();
  for (let i = 0; i < n; i++) await init();
  line("initialize, sequential", ((performance.now() - t0) / n).toFixed(3), "ms each");

  // Memory: N new sessions, then after they are all disposed.
  await sleep(IDLE_MS * 2); // let the sessions above be disposed
  const base = rssKb(child.pid);
  const sids = [];
  for (let i = 0; i < SESSIONS; i += 50) sids.push(...await Promise.all(Array.from({ length: 50 }, init)));
  const live = rssKb(child.pid);
  line(`RSS per live session (${SESSIONS})`, ((live - base) / SESSIONS).toFixed(2), "KB");
  await sleep(IDLE_MS * 2.5);
  const disposed = rssKb(child.pid);
  line(`RSS per disposed session (${SESSIONS})`, (Math.max(0, disposed - base) / SESSIONS).toFixed(2), "KB");

  // Restore: the first request on each disposed session rebuilds its runtime.
  const restore = [];
  for (const s of sids.slice(0, 500)) {
    const t = performance.now();
    const r = await post(s, { jsonrpc: "2.0", id: 4, method: "ping" });
    if (r.status !== 200) throw new Error(`restore answered ${r.status}`);
    restore.push(performance.now() - t);
  }
  const warm = [];
  for (const s of sids.slice(0, 500)) {
    const t = performance.now();
    await post(s, { jsonrpc: "2.0", id: 5, method: "ping" });
    warm.push(performance.now() - t);
  }
  line("first request after idle (restore), client", pct(restore, 50).toFixed(3), `ms p50  p99 ${pct(restore, 99).toFixed(3)} ms`);
  line("same request on a live session, client", pct(warm, 50).toFixed(3), `ms p50  p99 ${pct(warm, 99).toFixed(3)} ms`);
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const get = (name) => Number(metrics.match(new RegExp(`^${name} (\\S+)`, "m"))?.[1]);
  const mean = get("executor_session_restore_seconds_sum") / get("executor_session_restore_seconds_count");
  line("restore, server side (mean)", (mean * 1000).toFixed(3), "ms");
  // Integrations: import GitHub's spec, then the cost of the invocation
  // pipeline per tool call against a loopback upstream.
  const specs = join(ROOT, "tests/specs/node_modules/@octokit/openapi/generated/api.github.com.json");
  if (existsSync(specs)) {
    const timed = spawnSync("/usr/bin/time", ["-v", BIN, "integrations", "add", "openapi", "--spec", specs, "--namespace", "github", "--data-dir", dataDir], { encoding: "utf8" });
    const rss = Number(timed.stderr.match(/Maximum resident set size \(kbytes\): (\d+)/)?.[1] ?? NaN);
    const secs = Number(timed.stdout.match(/tools in ([\d.]+) s/)?.[1] ?? NaN);
    line(`import GitHub's spec (${timed.stdout.match(/(\d+) tools/)?.[1]} tools)`, secs.toFixed(2), `s  peak RSS ${(rss / 1024).toFixed(0)} MB`);
  } else {
    line("import GitHub's spec", "skipped", "(run tests/specs/install)");
  }
  const upstream = http.createServer((req, res) => { res.setHeader("content-type", "application/json"); res.end("[]"); });
  await new Promise((r) => upstream.listen(0, "127.0.0.1", r));
  const upstreamUrl = `http://127.0.0.1:${upstream.address().port}/v1`;
  execFileSync(BIN, ["integrations", "add", "openapi", "--spec", join(ROOT, "tests/e2e/fixtures/petstore.yaml"), "--namespace", "petstore", "--base-url", upstreamUrl, "--data-dir", dataDir]);
  execFileSync(BIN, ["connections", "set", "petstore", "--api-key", "-", "--data-dir", dataDir], { input: "bench-key\n" });
  const N = 200;
  const t1 = performance.now();
  for (let i = 0; i < N; i++) await (await fetch(`${upstreamUrl}/pets?limit=1`, { headers: { "x-api-key": "bench-key" } })).text();
  const directMs = (performance.now() - t1) / N;
  const sidCalls = await init();
  const r = await fetch(url, { method: "POST", headers: { ...headers(sidCalls), accept: "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "execute", arguments: { code: `const t = Date.now(); for (let i = 0; i < ${N}; i++) { const r = await tools.petstore.pets.listPets({ limit: 1 }); if (!r.ok) throw new Error(JSON.stringify(r.error)); } return (Date.now() - t) / ${N};` } } }) });
  const perCall = (await r.json()).result?.structuredContent?.result;
  line("tool call through the pipeline (loopback)", Number(perCall).toFixed(3), `ms each; a direct request from Node ${directMs.toFixed(3)} ms`);
  upstream.close();
} finally {
  child.kill("SIGTERM");
  await sleep(200);
  rmSync(dataDir, { recursive: true, force: true });
  if (pgName) psql(`DROP DATABASE IF EXISTS ${pgName} WITH (FORCE)`);
}
