// A/B of two builds on one machine. Both servers run at once (on SQLite, or
// each on its own Postgres database) and one raw node:http client takes
// turns between them, round by round, so a drift in the machine's speed
// falls on both alike — the figures of separate benchmark runs moved more
// between runs than most changes move them. Prints p50, mean and p90 per
// build and request kind, and B's p50 and mean over A's.
// Usage: cargo build --release && A=/path/to/old/executor bench/ab
//   B=target/release/executor (default) BENCH_STORE=postgres ROUNDS=8
//   PER_ROUND=400 KINDS=execute,initialize,tools
import http from "node:http";
import net from "node:net";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..");
if (!process.env.A) {
  console.error("usage: A=/path/to/the/other/executor [B=target/release/executor] bench/ab");
  process.exit(2);
}
const BUILDS = { A: process.env.A, B: process.env.B ?? join(ROOT, "target/release/executor") };
const STORE = process.env.BENCH_STORE ?? "sqlite";
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const PER_ROUND = Number(process.env.PER_ROUND ?? 400);
const KINDS = (process.env.KINDS ?? "execute,initialize,tools").split(",");
const PG_ADMIN = process.env.EXECUTOR_TEST_POSTGRES || "postgres://postgres@127.0.0.1:5432/postgres";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

/** One keep-alive socket per server: sequential requests, no pool effects. */
const poster = (port, bearer) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  return (sessionId, message) => new Promise((resolve, reject) => {
    const body = JSON.stringify(message);
    const headers = {
      authorization: `Bearer ${bearer}`, "content-type": "application/json",
      accept: "application/json, text/event-stream", "content-length": Buffer.byteLength(body),
    };
    if (sessionId) Object.assign(headers, { "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18" });
    const req = http.request({ host: "127.0.0.1", port, path: "/mcp", method: "POST", agent, headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
};

const healthy = async (port, child) => {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode})`);
    const ok = await new Promise((r) => http.get({ host: "127.0.0.1", port, path: "/healthz" }, (res) => { res.resume(); r(res.statusCode === 200); }).on("error", () => r(false)));
    if (ok) return;
    await sleep(50);
  }
  throw new Error("the server did not become healthy");
};

const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "ab", version: "1" } } };

const start = async (label, bin) => {
  const dataDir = mkdtempSync(join(tmpdir(), `executor-ab-${label}-`));
  // The initialize rows open a session per request.
  const env = { ...process.env, RUST_LOG: "warn", EXECUTOR_MAX_SESSIONS_PER_PRINCIPAL: "10000000" };
  let db = null;
  if (STORE === "postgres") {
    db = `executor_ab_${label.toLowerCase()}_${process.pid}`;
    execFileSync("psql", [PG_ADMIN, "-qtAc", `CREATE DATABASE ${db}`]);
    const url = new URL(PG_ADMIN);
    url.pathname = `/${db}`;
    env.EXECUTOR_DATABASE_URL = url.toString();
    env.EXECUTOR_SECRET_KEY ??= "11".repeat(32);
  }
  const port = await freePort();
  const child = spawn(bin, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir], { env, stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise((r) => child.once("exit", r));
  const cleanup = async () => {
    if (child.exitCode === null) { child.kill("SIGTERM"); await Promise.race([exited, sleep(5000)]); }
    rmSync(dataDir, { recursive: true, force: true });
    if (db) execFileSync("psql", [PG_ADMIN, "-qtAc", `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`]);
  };
  try {
    await healthy(port, child);
    const bearer = execFileSync(bin, ["token", "create", "--email", "ab@example.com", "--data-dir", dataDir], { env, encoding: "utf8" })
      .trim().split("\n").pop().trim();
    const post = poster(port, bearer);
    const opened = await post(null, initialize);
    const sid = opened.headers["mcp-session-id"];
    if (!sid) throw new Error(`initialize answered ${opened.status}`);
    await post(sid, { jsonrpc: "2.0", method: "notifications/initialized" });
    return { label, post, sid, cleanup };
  } catch (e) {
    await cleanup();
    throw e;
  }
};

/** One request of `kind`; throws when the answer is not the expected one. */
const REQUESTS = {
  execute: async (s) => {
    const r = await s.post(s.sid, { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "execute", arguments: { code: "return 1;" } } });
    if (r.status !== 200 || !r.body.includes('"text":"1"')) throw new Error(`execute answered ${r.status}: ${r.body.slice(0, 200)}`);
  },
  initialize: async (s) => {
    const r = await s.post(null, initialize);
    if (!r.headers["mcp-session-id"]) throw new Error(`initialize answered ${r.status}: ${r.body.slice(0, 200)}`);
  },
  tools: async (s) => {
    const r = await s.post(s.sid, { jsonrpc: "2.0", id: 2, method: "tools/list" });
    if (r.status !== 200 || !r.body.includes('"execute"')) throw new Error(`tools/list answered ${r.status}`);
  },
};
for (const kind of KINDS) if (!REQUESTS[kind]) throw new Error(`unknown kind ${kind}: execute, initialize or tools`);

const timed = async (s, kind, n) => {
  const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await REQUESTS[kind](s);
    out.push(performance.now() - t0);
  }
  return out;
};

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: s[Math.floor(s.length / 2)], p90: s[Math.floor(s.length * 0.9)], mean: s.reduce((a, b) => a + b, 0) / s.length };
};

const servers = [];
try {
  for (const [label, bin] of Object.entries(BUILDS)) servers.push(await start(label, bin));
  const samples = Object.fromEntries(KINDS.map((k) => [k, { A: [], B: [] }]));
  for (const kind of KINDS) for (const s of servers) await timed(s, kind, 100); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    // Each build goes first in half of the rounds.
    const order = round % 2 ? [...servers].reverse() : servers;
    for (const kind of KINDS) for (const s of order) samples[kind][s.label].push(...await timed(s, kind, PER_ROUND));
  }
  console.log(`store: ${STORE}; ${ROUNDS} rounds × ${PER_ROUND} sequential requests per build and kind`);
  console.log(`A: ${BUILDS.A}\nB: ${BUILDS.B}`);
  for (const kind of KINDS) {
    const a = stats(samples[kind].A), b = stats(samples[kind].B);
    const row = (label, x) => console.log(`${kind.padEnd(11)} ${label}  p50 ${x.p50.toFixed(3)}  mean ${x.mean.toFixed(3)}  p90 ${x.p90.toFixed(3)} ms`);
    row("A", a);
    row("B", b);
    console.log(`${kind.padEnd(11)} B/A  p50 ×${(b.p50 / a.p50).toFixed(3)}  mean ×${(b.mean / a.mean).toFixed(3)}`);
  }
} finally {
  for (const s of servers) await s.cleanup();
}
