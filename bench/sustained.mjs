// A sustained agent load against one server, for the store's size over
// time (issue 41 §5): one session, CONNS connections, each looping
// `execute` of a program that returns 50 small objects, for MINUTES. Every
// 10 s it prints the executions so far, the rate, the server's RSS and the
// store's size (the data dir on SQLite, the database on Postgres), as a
// Markdown table. See bench/sustained.
import http from "node:http";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { startServer, initSession, sleep } from "../tests/e2e/harness.mjs";

const MINUTES = Number(process.env.MINUTES ?? 10);
const CONNS = Number(process.env.CONNS ?? 8);
const STORE = process.env.BENCH_STORE ?? "sqlite";
const SERVER_ARGS = (process.env.SERVER_ARGS ?? "").split(/\s+/).filter(Boolean);

const srv = await startServer({ store: STORE, idleMs: 600_000, args: SERVER_ARGS });
const bearer = srv.mint("load@bench.test");
const { sessionId, protocolVersion } = await initSession(srv, bearer, "2025-11-25");
const agent = new http.Agent({ keepAlive: true, maxSockets: CONNS });
const body = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: { name: "execute", arguments: { code: "return Array.from({ length: 50 }, (_, i) => ({ i, name: 'item' + i, ok: true }))" } },
});
const execute = () =>
  new Promise((resolve) => {
    const req = http.request(srv.mcpUrl, {
      method: "POST",
      agent,
      headers: {
        authorization: `Bearer ${bearer}`,
        "content-type": "application/json",
        // As the SDK clients ask: the answer comes on an SSE stream, logged.
        accept: "application/json, text/event-stream",
        "mcp-session-id": sessionId,
        "mcp-protocol-version": protocolVersion,
        "content-length": Buffer.byteLength(body),
      },
    }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve(res.statusCode === 200 && text.includes('"status":"completed"')));
      res.on("error", () => resolve(false));
    });
    req.on("error", () => resolve(false));
    req.end(body);
  });

const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${srv.child.pid}/status`, "utf8"))[1]) / 1024;
const storeMb = () =>
  STORE === "postgres"
    ? Number(srv.pg.sql("SELECT pg_database_size(current_database())").trim()) / 2 ** 20
    : Number(execFileSync("du", ["-sb", srv.dataDir], { encoding: "utf8" }).split(/\s/)[0]) / 2 ** 20;

let ok = 0;
let failed = 0;
const deadline = Date.now() + MINUTES * 60_000;
const worker = async () => {
  while (Date.now() < deadline) (await execute()) ? ok++ : failed++;
};
const started = Date.now();
console.log(`store: ${STORE}; flags: ${SERVER_ARGS.join(" ") || "(defaults)"}; ${CONNS} connections, ${MINUTES} min`);
console.log("| t (s) | executions | per s (last 10 s) | failed | RSS (MB) | store (MB) |");
console.log("|---|---|---|---|---|---|");
let last = 0;
let peakStore = 0;
let peakRss = 0;
const sampler = (async () => {
  while (Date.now() < deadline) {
    await sleep(10_000);
    const [rss, store] = [rssMb(), storeMb()];
    peakStore = Math.max(peakStore, store);
    peakRss = Math.max(peakRss, rss);
    const t = Math.round((Date.now() - started) / 1000);
    console.log(`| ${t} | ${ok} | ${Math.round((ok - last) / 10)} | ${failed} | ${rss.toFixed(0)} | ${store.toFixed(0)} |`);
    last = ok;
  }
})();
await Promise.all([...Array.from({ length: CONNS }, worker), sampler]);
console.log(`\n${ok} executions, ${failed} failed; peak RSS ${peakRss.toFixed(0)} MB; peak store ${peakStore.toFixed(0)} MB`);
agent.destroy();
await srv.cleanup();
process.exit(0);
