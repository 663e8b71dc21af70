// The built-in authorization server's figures: see bench/authz.
import { spawn, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = new URL("..", import.meta.url).pathname;
const BIN = process.env.EXECUTOR_BIN ?? join(ROOT, "target/release/executor");
const FLOWS = Number(process.env.FLOWS ?? 200);
const REFRESHES = Number(process.env.REFRESHES ?? 100);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const DURATION = Number(process.env.DURATION ?? 6);
const CONNS = Number(process.env.CONNS ?? 8);
const REDIRECT = "http://127.0.0.1/callback";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const quantile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const median = (xs) => quantile(xs, 0.5);
const f2 = (x) => x.toFixed(2);
const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

const dataDir = mkdtempSync(join(tmpdir(), "executor-bench-authz-"));
const env = { ...process.env, RUST_LOG: "warn" };
const cli = (...args) => execFileSync(BIN, [...args, "--data-dir", dataDir], { env, encoding: "utf8" }).trim();
const apiToken = cli("token", "create", "--email", "bench@example.com");
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const server = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--oauth-registration-rate", "1000000"], { env, stdio: ["ignore", "inherit", "inherit"] });
const cleanup = () => { if (server.exitCode === null) server.kill("SIGKILL"); rmSync(dataDir, { recursive: true, force: true }); };
process.on("exit", cleanup);
for (let i = 0; ; i++) {
  try { if ((await fetch(`${base}/healthz`)).ok) break; } catch {}
  if (i > 200) throw new Error("the server did not start");
  await sleep(50);
}

// Signed in once, as a browser would be.
const signIn = await fetch(`${base}/console/login`, {
  method: "POST", redirect: "manual",
  headers: { "content-type": "application/x-www-form-urlencoded", origin: base },
  body: new URLSearchParams({ token: apiToken }).toString(),
});
const cookie = signIn.headers.getSetCookie()[0].split(";")[0];

const form = (o) => new URLSearchParams(o).toString();
const hidden = (html) => Object.fromEntries([...html.matchAll(/<input type=hidden name="([^"]*)" value="([^"]*)">/g)]
  .map((m) => [m[1], m[2].replace(/&amp;/g, "&").replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">")]));

/** One whole flow: register, /authorize, consent, /token. */
const flow = async () => {
  const reg = await (await fetch(`${base}/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ client_name: "bench", redirect_uris: [REDIRECT] }) })).json();
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const q = form({ response_type: "code", client_id: reg.client_id, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: "S256", state: "s", resource: `${base}/mcp` });
  const page = await (await fetch(`${base}/authorize?${q}`, { headers: { cookie } })).text();
  const consent = await fetch(`${base}/authorize`, { method: "POST", redirect: "manual", headers: { cookie, origin: base, "content-type": "application/x-www-form-urlencoded" }, body: form({ ...hidden(page), decision: "allow" }) });
  const code = new URL(consent.headers.get("location")).searchParams.get("code");
  const tokens = await (await fetch(`${base}/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form({ grant_type: "authorization_code", code, code_verifier: verifier, client_id: reg.client_id, redirect_uri: REDIRECT }) })).json();
  if (!tokens.access_token) throw new Error(`no token: ${JSON.stringify(tokens)}`);
  return { client: reg.client_id, tokens };
};

// ---- 1. the code flow, sequentially
for (let i = 0; i < 10; i++) await flow();
const flowMs = [];
let last;
for (let i = 0; i < FLOWS; i++) {
  const t0 = performance.now();
  last = await flow();
  flowMs.push(performance.now() - t0);
}

// ---- 2. concurrent refreshes, each of its own grant
const grants = [];
for (let i = 0; i < REFRESHES; i++) grants.push(await flow());
const refreshRound = async () => Promise.all(grants.map(async (g) => {
  const t0 = performance.now();
  const res = await fetch(`${base}/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form({ grant_type: "refresh_token", refresh_token: g.tokens.refresh_token, client_id: g.client }) });
  const body = await res.json();
  if (!body.refresh_token) throw new Error(`refresh: ${JSON.stringify(body)}`);
  g.tokens = body;
  return performance.now() - t0;
}));
const refreshP50s = [];
const refreshP99s = [];
for (let r = 0; r < ROUNDS; r++) {
  const ms = await refreshRound();
  refreshP50s.push(median(ms));
  refreshP99s.push(quantile(ms, 0.99));
}

// ---- 3. tools/list under wrk, OAuth token against API token
const lua = (s) => `[==[${s}]==]`;
const wrk = (headers, body) => new Promise((resolve, reject) => {
  const dir = mkdtempSync(join(tmpdir(), "bench-authz-wrk-"));
  writeFileSync(join(dir, "req.lua"), [`wrk.method = "POST"`, `wrk.body = ${lua(body)}`,
    ...Object.entries(headers).map(([k, v]) => `wrk.headers[ ${lua(k)} ] = ${lua(v)}`)].join("\n"));
  const p = spawn("wrk", ["-t1", `-c${CONNS}`, `-d${DURATION}s`, "-s", join(dir, "req.lua"), `${base}/mcp`]);
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  p.on("exit", (code) => {
    rmSync(dir, { recursive: true, force: true });
    if (code !== 0) return reject(new Error("wrk failed"));
    const non2xx = Number(out.match(/Non-2xx or 3xx responses: (\d+)/)?.[1] ?? 0);
    if (non2xx) return reject(new Error(`${non2xx} failed requests`));
    resolve(Number(out.match(/Requests\/sec:\s+([\d.]+)/)?.[1]));
  });
});
const session = async (bearer) => {
  const headers = { authorization: `Bearer ${bearer}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" };
  const init = await fetch(`${base}/mcp`, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench-authz", version: "1" } } }) });
  await init.text();
  const sid = init.headers.get("mcp-session-id");
  await (await fetch(`${base}/mcp`, { method: "POST", headers: { ...headers, "mcp-session-id": sid }, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).text();
  return { ...headers, "mcp-session-id": sid };
};
const oauthToken = (await flow()).tokens.access_token;
const arms = { api: await session(apiToken), oauth: await session(oauthToken) };
const body = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" });
await wrk(arms.api, body);
const ratios = [];
const rps = { api: [], oauth: [] };
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 ? ["oauth", "api"] : ["api", "oauth"];
  const got = {};
  for (const arm of order) got[arm] = await wrk(arms[arm], body);
  rps.api.push(got.api);
  rps.oauth.push(got.oauth);
  ratios.push(got.oauth / got.api);
}

const row = (name, value) => console.log(`${name.padEnd(64)} ${value}`);
console.log(`\nbench/authz (${FLOWS} flows, ${REFRESHES} concurrent refreshes x ${ROUNDS} rounds, wrk 1 thread ${CONNS} connections ${DURATION} s x ${ROUNDS} rounds)`);
row("code flow end to end (register, authorize, consent, token) p50", `${f2(median(flowMs))} ms`);
row("code flow end to end p99", `${f2(quantile(flowMs, 0.99))} ms`);
row(`/token refresh p50 under ${REFRESHES} concurrent (median of rounds)`, `${f2(median(refreshP50s))} ms (rounds ${refreshP50s.map(f2).join(", ")})`);
row(`/token refresh p99 under ${REFRESHES} concurrent (median of rounds)`, `${f2(median(refreshP99s))} ms`);
row("tools/list req/s, API token (median)", `${median(rps.api).toFixed(0)}`);
row("tools/list req/s, OAuth token (median)", `${median(rps.oauth).toFixed(0)}`);
row("OAuth / API token (median of round ratios)", `x${median(ratios).toFixed(3)} (rounds ${ratios.map((x) => x.toFixed(3)).join(", ")})`);
const missed = [];
if (median(flowMs) >= 50) missed.push("code flow p50 >= 50 ms");
if (median(ratios) < 0.95) missed.push("OAuth tools/list more than 5% below the API token's");
if (missed.length) { console.log(`missed: ${missed.join("; ")}`); process.exitCode = 1; }
cleanup();
process.exit(process.exitCode ?? 0);
