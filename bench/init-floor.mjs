// What the sequential-initialize figure of ../shared/bench/run measures:
// the same loop (initialize, then notifications/initialized, one pair at a
// time from Node's fetch) against our server and against a Node server that
// answers every request with a constant and does nothing else. The second
// is the client's own cost: no server can measure below it.
// Usage: cargo build --release && bench/init-floor
import http from "node:http";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const BIN = process.env.EXECUTOR_BIN ?? join(import.meta.dirname, "../target/release/executor");

const pairs = async (url, bearer, n) => {
  const post = async (sid, body) => {
    const headers = {
      authorization: `Bearer ${bearer}`, "content-type": "application/json",
      accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18",
    };
    if (sid) headers["mcp-session-id"] = sid;
    const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
    await res.text();
    return res;
  };
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const res = await post(null, {
      jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    await post(res.headers.get("mcp-session-id"), { jsonrpc: "2.0", method: "notifications/initialized" });
  }
  return (performance.now() - t0) / n;
};

// A child process, so that the client's loop and the server do not share
// one event loop.
const constantServer = () =>
  new Promise((resolve) => {
    const code = `require("node:http").createServer((q, s) => { q.resume(); q.on("end", () => {
      s.setHeader("content-type", "application/json"); s.setHeader("mcp-session-id", "x");
      s.end('{"jsonrpc":"2.0","id":1,"result":{}}'); }); }).listen(0, "127.0.0.1", function () {
      console.log(this.address().port); });`;
    const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
    child.stdout.once("data", (d) => resolve({ url: `http://127.0.0.1:${String(d).trim()}/mcp`, child }));
  });

const ours = async () => {
  const dir = mkdtempSync(join(tmpdir(), "init-floor-"));
  const out = execFileSync(BIN, ["token", "create", "--email", "floor@example.com", "--data-dir", dir]).toString();
  const bearer = out.match(/exk_[A-Za-z0-9_-]+/)[0];
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dir], {
    env: { ...process.env, RUST_LOG: "warn" }, stdio: "ignore",
  });
  const url = `http://127.0.0.1:${port}/mcp`;
  for (let i = 0; i < 100; i++) {
    try { await fetch(`http://127.0.0.1:${port}/healthz`); break; } catch { await new Promise((r) => setTimeout(r, 50)); }
  }
  return { url, bearer, child, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
};

// The constant server goes first, so the client is no colder for ours.
const constant = await constantServer();
const floorCold = await pairs(constant.url, "x", 300);
const floorWarm = await pairs(constant.url, "x", 3000);
constant.child.kill();
const server = await ours();
const oursCold = await pairs(server.url, server.bearer, 300);
const oursWarm = await pairs(server.url, server.bearer, 3000);
server.child.kill();
server.cleanup();
const ms = (x) => `${x.toFixed(2)} ms`;
console.log(`initialize + initialized, 300 pairs:   constant server ${ms(floorCold)}, ours ${ms(oursCold)}`);
console.log(`initialize + initialized, 3,000 more:  constant server ${ms(floorWarm)}, ours ${ms(oursWarm)}`);
