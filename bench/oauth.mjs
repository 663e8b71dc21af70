// OAuth connection figures (README): a login end to end against a local
// authorization server (oidc-provider, tests/e2e/fixtures/oauth-as.mjs)
// without the browser's own steps; the cost of a call with an OAuth token
// against the same call with an API key; the token requests 100 concurrent
// calls make when their token has expired. Usage (from the project root,
// after `cargo build --release`):  bench/oauth   (LOGINS=20, N=500)
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const ROOT = new URL("..", import.meta.url).pathname;
const BIN = process.env.EXECUTOR_BIN ?? join(ROOT, "target/release/executor");
const FIXTURE = join(ROOT, "tests/e2e/fixtures/oauth-as.mjs");
const LOGINS = Number(process.env.LOGINS ?? 20);
const N = Number(process.env.N ?? 500);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});
const line = (name, value, unit = "") => console.log(`${name.padEnd(72)} ${value} ${unit}`.trimEnd());
const quantile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };

// ---- the authorization server and what it protects
const asPort = await freePort();
const asProc = spawn(process.execPath, [FIXTURE, String(asPort)], { stdio: ["ignore", "pipe", "inherit"] });
await new Promise((resolve) => asProc.stdout.on("data", (d) => String(d).includes("listening") && resolve()));
const origin = `http://127.0.0.1:${asPort}`;
const stats = async () => (await fetch(`${origin}/_test/stats`)).json();

// ---- the server
const dataDir = mkdtempSync(join(tmpdir(), "executor-bench-oauth-"));
const env = { ...process.env, RUST_LOG: "warn" };
const cli = (...args) => new Promise((resolve, reject) =>
  execFile(BIN, [...args, "--data-dir", dataDir], { encoding: "utf8", env },
    (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout))));
const bearer = (await cli("token", "create", "--email", "bench@example.com")).trim();
await cli("integrations", "add", "mcp", "--url", `${origin}/mcp`, "--namespace", "secure", "--allow-local-network");
await cli("integrations", "add", "openapi", "--spec", `${origin}/openapi.json`, "--namespace", "api", "--allow-local-network");
await cli("integrations", "add", "openapi", "--spec", `${origin}/openapi-keyed.json`, "--namespace", "keyed", "--allow-local-network");
// The OAuth API again, its token set by hand as a plain bearer connection:
// against it, the OAuth connection's own cost shows alone (the upstream's
// token check is the same for both).
await cli("integrations", "add", "openapi", "--spec", `${origin}/openapi.json`, "--namespace", "plain", "--allow-local-network");
// `--api-key -` reads the key from standard input.
await new Promise((resolve, reject) => {
  const p = execFile(BIN, ["connections", "set", "keyed", "--api-key", "-", "--data-dir", dataDir], { env }, (e) => (e ? reject(e) : resolve()));
  p.stdin.end("key-0123456789");
});
const setSecret = (namespace, flag, value) => new Promise((resolve, reject) => {
  const p = execFile(BIN, ["connections", "set", namespace, flag, "-", "--data-dir", dataDir], { env }, (e) => (e ? reject(e) : resolve()));
  p.stdin.end(value);
});
const port = await freePort();
const server = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--allow-local-network", "--max-calls-in-flight", "128"], {
  stdio: ["ignore", "ignore", "inherit"], env,
});
for (let i = 0; i < 100; i++) { try { if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break; } catch {} await sleep(50); }

/** A browser: follows redirects by hand with a cookie jar; the time spent on
 * the authorization server's own pages is the browser step, not ours. */
const browse = async (start) => {
  const cookies = new Map();
  let url = start;
  let browserMs = 0;
  for (let hop = 0; hop < 12; hop++) {
    const ours = url.startsWith(`http://127.0.0.1:${port}/`);
    const t = performance.now();
    const res = await fetch(url, { redirect: "manual", headers: { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") } });
    for (const c of res.headers.getSetCookie()) { const [kv] = c.split(";"); const i = kv.indexOf("="); cookies.set(kv.slice(0, i), kv.slice(i + 1)); }
    await res.arrayBuffer();
    if (!ours) browserMs += performance.now() - t;
    const next = res.headers.get("location");
    if (!next || res.status < 300 || res.status >= 400) return browserMs;
    url = new URL(next, url).toString();
  }
  throw new Error("too many redirects");
};

/** One `connections login` through the server's callback: ms without the browser step. */
const login = async (namespace) => {
  const t = performance.now();
  const child = spawn(BIN, ["connections", "login", namespace, "--allow-local-network", "--no-browser", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir], { env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  while (!/^https?:\/\//m.test(out)) { if (child.exitCode !== null) throw new Error(err); await sleep(2); }
  const browserMs = await browse(out.split("\n").find((l) => /^https?:\/\//.test(l)));
  const code = await exited;
  if (code !== 0) throw new Error(err);
  return performance.now() - t - browserMs;
};

// ---- 1. logins
for (let i = 0; i < 2; i++) await login("secure");
const logins = [];
for (let i = 0; i < LOGINS; i++) logins.push(await login("secure"));
line(`login end to end, MCP server, server's callback (${LOGINS} logins), p50`, quantile(logins, 0.5).toFixed(1), "ms");
line("login end to end, p95", quantile(logins, 0.95).toFixed(1), "ms");
await login("api");
// The API's access token is the one its login's code exchange issued last.
const { issued } = await stats();
await setSecret("plain", "--bearer", issued[issued.length - 2]);

// ---- 2. a call with an OAuth token against a call with an API key
const executor = new Client({ name: "bench", version: "1" });
await executor.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }));
const execute = async (code) => {
  const r = await executor.callTool({ name: "execute", arguments: { code } }, undefined, { timeout: 600_000 });
  if (r.isError || r.structuredContent?.status !== "completed") throw new Error(JSON.stringify(r).slice(0, 800));
  return r.structuredContent.result;
};
// Interleaved in blocks of 50, so that the machine's drift falls on all three.
const means = await execute(`
  const calls = { keyed: () => tools.keyed.me.getMe({}), plain: () => tools.plain.me.getMe({}), oauth: () => tools.api.me.getMe({}) };
  const total = { keyed: 0, plain: 0, oauth: 0 };
  for (const name in calls) for (let i = 0; i < 20; i++) await calls[name]();
  for (let block = 0; block < ${Math.ceil(N / 50)}; block++) {
    for (const name in calls) {
      const t = Date.now();
      for (let i = 0; i < 50; i++) { const r = await calls[name](); if (!r.ok) throw new Error(JSON.stringify(r.error)); }
      total[name] += Date.now() - t;
    }
  }
  const n = ${Math.ceil(N / 50)} * 50;
  return { keyed: total.keyed / n, plain: total.plain / n, oauth: total.oauth / n };`);
line(`GET /me with an API key, through execute (${Math.ceil(N / 50) * 50} calls, interleaved), mean`, means.keyed.toFixed(3), "ms");
line("GET /me with the OAuth token set as a plain bearer connection, mean", means.plain.toFixed(3), "ms");
line("GET /me with the OAuth connection (valid token), mean", means.oauth.toFixed(3), "ms");
line("OAuth connection − plain bearer, per call (our cost)", (means.oauth - means.plain).toFixed(3), "ms");

// ---- 3. 100 concurrent calls on an expired token
await fetch(`${origin}/_test/ttl?s=2`);
await login("secure");
const refreshes = [];
for (let round = 0; round < 3; round++) {
  await sleep(2500);
  const before = (await stats()).grants.refresh_token;
  const oks = await execute("return (await Promise.all(Array.from({length: 100}, () => tools.secure.whoami({})))).filter((r) => r.ok).length");
  if (oks !== 100) throw new Error(`${oks} of 100 calls passed`);
  refreshes.push((await stats()).grants.refresh_token - before);
}
line("token requests for 100 concurrent calls on an expired token (3 rounds)", refreshes.join(", "));

await executor.close();
server.kill("SIGTERM");
asProc.kill("SIGKILL");
await sleep(300);
rmSync(dataDir, { recursive: true, force: true });
process.exit(0);
