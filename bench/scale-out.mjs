// The scale-out benchmark (SPEC §10, issue 12): the same load on the
// embedded store, on Postgres with one node, and on Postgres with three
// nodes behind nginx (round robin). Figures in docs/performance.md come from this.
//   cargo build --release && bench/scale-out
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import net from "node:net";
import autocannon from "autocannon";

const ROOT = new URL("..", import.meta.url).pathname;
const BIN = process.env.EXECUTOR_BIN ?? join(ROOT, "target/release/executor");
const DURATION = Number(process.env.DURATION ?? 5);
const CONNS = Number(process.env.CONNS ?? 16);
const RESTORES = Number(process.env.RESTORES ?? 300);
const IDLE_MS = 1500;
const PG_ADMIN = process.env.EXECUTOR_TEST_POSTGRES || "postgres://postgres@127.0.0.1:5432/postgres";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const freePort = () => new Promise((resolve) => { const s = net.createServer(); s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); }); });
const psql = (sql, url = PG_ADMIN) => execFileSync("psql", [url, "-qtAc", sql], { encoding: "utf8" });
const healthy = async (base) => { for (let i = 0; i < 200; i++) { try { if ((await fetch(`${base}/healthz`)).ok) return; } catch {} await sleep(50); } throw new Error(`${base} never became healthy`); };
const cleanups = [];

const startNode = async (env, dataDir) => {
  const port = await freePort();
  const child = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--session-idle-timeout", String(IDLE_MS), "--node-lease-ms", "5000"], {
    stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, RUST_LOG: "warn", ...env },
  });
  cleanups.push(() => child.kill("SIGTERM"));
  const base = `http://127.0.0.1:${port}`;
  await healthy(base);
  return { base, url: `${base}/mcp`, port };
};

const startNginx = async (ports) => {
  const dir = mkdtempSync(join(tmpdir(), "executor-bench-nginx-"));
  const port = await freePort();
  writeFileSync(join(dir, "nginx.conf"), `user root; worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/error.log error;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path ${dir}/b; proxy_temp_path ${dir}/p; fastcgi_temp_path ${dir}/f; uwsgi_temp_path ${dir}/u; scgi_temp_path ${dir}/s;
  upstream executor { ${ports.map((p) => `server 127.0.0.1:${p} max_fails=0;`).join(" ")} keepalive 64; }
  server { listen 127.0.0.1:${port}; location / { proxy_pass http://executor; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host $http_host; proxy_buffering off; proxy_request_buffering off; proxy_read_timeout 1h; } } }`);
  const child = spawn("/usr/sbin/nginx", ["-p", dir, "-c", join(dir, "nginx.conf"), "-g", "daemon off;"], { stdio: "ignore" });
  cleanups.push(() => { child.kill("SIGTERM"); rmSync(dir, { recursive: true, force: true }); });
  const base = `http://127.0.0.1:${port}`;
  await healthy(base);
  return { base, url: `${base}/mcp`, port };
};

/** One store, `count` nodes; the front is nginx when there are several. */
const setUp = async (store, count) => {
  const dataDir = mkdtempSync(join(tmpdir(), "executor-bench-"));
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  let env = {};
  if (store === "postgres") {
    const name = `executor_bench_${process.pid}_${randomBytes(3).toString("hex")}`;
    psql(`CREATE DATABASE ${name}`);
    const url = new URL(PG_ADMIN);
    url.pathname = `/${name}`;
    env = { EXECUTOR_DATABASE_URL: url.toString(), EXECUTOR_SECRET_KEY: randomBytes(32).toString("hex") };
    cleanups.push(() => psql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  }
  const nodes = [];
  for (let i = 0; i < count; i++) nodes.push(await startNode(env, count === 1 ? dataDir : mkdtempSync(join(dataDir, `n${i}-`))));
  const bearer = execFileSync(BIN, ["token", "create", "--email", "bench@example.com", "--data-dir", dataDir], { encoding: "utf8", env: { ...process.env, ...env } }).trim();
  const front = count === 1 ? nodes[0] : await startNginx(nodes.map((n) => n.port));
  return { nodes, front, bearer };
};

const headers = (bearer, sid) => ({
  authorization: `Bearer ${bearer}`, "content-type": "application/json",
  accept: "application/json, text/event-stream", ...(sid ? { "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" } : {}),
});
const post = async (url, bearer, sid, body) => {
  const r = await fetch(url, { method: "POST", headers: headers(bearer, sid), body: JSON.stringify(body) });
  await r.text();
  if (r.status !== 200) throw new Error(`${url} answered ${r.status}`);
  return r;
};
const init = async (url, bearer) => {
  const r = await post(url, bearer, null, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "1" } } });
  return r.headers.get("mcp-session-id");
};
const load = (url, bearer, sid, body) => new Promise((resolve, reject) =>
  autocannon({ url, method: "POST", connections: CONNS, duration: DURATION, headers: headers(bearer, sid), body: JSON.stringify(body) },
    (err, res) => (err ? reject(err) : resolve(res))));
const PING = { jsonrpc: "2.0", id: 4, method: "ping" };
/** Client latency of the first request on each session, then of a second one. */
const firstRequests = async (sids, urlOf, bearer) => {
  const times = [];
  for (const [i, s] of sids.entries()) {
    const t = performance.now();
    await post(urlOf(i), bearer, s, PING);
    times.push(performance.now() - t);
  }
  return times;
};
const restoreMean = async (nodes) => {
  let sum = 0, count = 0;
  for (const n of nodes) {
    const text = await (await fetch(`${n.base}/metrics`)).text();
    sum += Number(text.match(/^executor_session_restore_seconds_sum (\S+)/m)?.[1] ?? 0);
    count += Number(text.match(/^executor_session_restore_seconds_count (\S+)/m)?.[1] ?? 0);
  }
  return count ? (sum / count) * 1000 : NaN;
};

const rows = [];
const measure = async (label, store, count) => {
  const { nodes, front, bearer } = await setUp(store, count);
  const row = { label };
  const sid = await init(nodes[0].url, bearer);
  const tl = await load(front.url, bearer, sid, { jsonrpc: "2.0", id: 2, method: "tools/list" });
  row.toolsList = `${tl.requests.average.toFixed(0)} req/s, p50 ${tl.latency.p50} ms`;
  row.errors = tl.errors + tl.non2xx;
  const ex = await load(front.url, bearer, sid, { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "execute", arguments: { code: "return 1;" } } });
  row.execute = `${ex.requests.average.toFixed(0)} req/s, p50 ${ex.latency.p50} ms`;
  row.errors += ex.errors + ex.non2xx;
  // Restore after idle: sessions made on node 0, left to be disposed, then
  // the first request of each, on node 0 (restore where it was).
  const sids = [];
  for (let i = 0; i < RESTORES; i += 50) sids.push(...(await Promise.all(Array.from({ length: Math.min(50, RESTORES - i) }, () => init(nodes[0].url, bearer)))));
  await sleep(IDLE_MS * 2.5);
  const before = await restoreMean(nodes);
  const restore = await firstRequests(sids, () => nodes[0].url, bearer);
  const warm = await firstRequests(sids, () => nodes[0].url, bearer);
  row.restore = `${pct(restore, 50).toFixed(3)} ms p50 (live ${pct(warm, 50).toFixed(3)} ms); server ${(await restoreMean(nodes)).toFixed(3)} ms mean`;
  void before;
  if (count > 1) {
    // A session that moves: made on node 0, disposed (its lease released),
    // then asked for on node 1, which claims and restores it.
    const moving = [];
    for (let i = 0; i < RESTORES; i += 50) moving.push(...(await Promise.all(Array.from({ length: Math.min(50, RESTORES - i) }, () => init(nodes[0].url, bearer)))));
    await sleep(IDLE_MS * 2.5);
    const moved = await firstRequests(moving, () => nodes[1].url, bearer);
    row.move = `${pct(moved, 50).toFixed(3)} ms p50, p99 ${pct(moved, 99).toFixed(3)} ms`;
    // A request on a node that does not hold the live session: one hop.
    const held = await init(nodes[0].url, bearer);
    const hop = await firstRequests(Array(300).fill(held), () => nodes[1].url, bearer);
    const direct = await firstRequests(Array(300).fill(held), () => nodes[0].url, bearer);
    row.hop = `${pct(hop, 50).toFixed(3)} ms p50 vs ${pct(direct, 50).toFixed(3)} ms on the holder`;
  }
  rows.push(row);
  while (cleanups.length) await cleanups.pop()();
  await sleep(500);
};

try {
  await measure("SQLite, one node", "sqlite", 1);
  await measure("Postgres, one node", "postgres", 1);
  await measure("Postgres, three nodes behind nginx", "postgres", 3);
} finally {
  while (cleanups.length) { try { await cleanups.pop()(); } catch {} }
}
for (const r of rows) {
  console.log(`\n${r.label}`);
  console.log(`  tools/list (${CONNS} conns)          ${r.toolsList}`);
  console.log(`  execute "return 1;" (${CONNS} conns) ${r.execute}`);
  console.log(`  first request after idle         ${r.restore}`);
  if (r.move) console.log(`  session moving between nodes     ${r.move}`);
  if (r.hop) console.log(`  request handed to the holder     ${r.hop}`);
  console.log(`  errors                           ${r.errors}`);
}
