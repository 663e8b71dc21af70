// Integrations II figures: the latency an upstream MCP call and a GraphQL
// call add when made through `execute`, the upstream sessions 1,000 calls
// open, and the import of GitHub's GraphQL schema. Usage (from the project
// root, after `cargo build --release`):  bench/upstream   (N=500)
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { buildSchema } from "graphql";
import { createHandler } from "graphql-http/lib/use/http";

const ROOT = new URL("..", import.meta.url).pathname;
const BIN = process.env.EXECUTOR_BIN ?? join(ROOT, "target/release/executor");
const N = Number(process.env.N ?? 500);
const HERE = new URL(".", import.meta.url).pathname;
const EVERYTHING = join(HERE, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const GITHUB_SDL = join(HERE, "node_modules/@octokit/graphql-schema/schema.graphql");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});
const rssMb = (pid) => Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]) / 1024;
const line = (name, value, unit = "") => console.log(`${name.padEnd(64)} ${value} ${unit}`.trimEnd());

// ---- upstreams: server-everything over streamable HTTP, a GraphQL engine
const everythingPort = await freePort();
let everythingOut = "";
const everything = spawn(process.execPath, [EVERYTHING, "streamableHttp"], { env: { ...process.env, PORT: String(everythingPort) }, stdio: ["ignore", "pipe", "pipe"] });
everything.stdout.on("data", (d) => (everythingOut += d));
everything.stderr.on("data", (d) => (everythingOut += d));
for (let i = 0; i < 200 && !/listening on port/.test(everythingOut); i++) await sleep(50);
const everythingUrl = `http://127.0.0.1:${everythingPort}/mcp`;
const sessionsOpened = () => (everythingOut.match(/Session initialized/g) ?? []).length;

const graphql = http.createServer(createHandler({ schema: buildSchema("type Query { version: String! }"), rootValue: { version: () => "1.0" } }));
await new Promise((r) => graphql.listen(0, "127.0.0.1", r));
const graphqlUrl = `http://127.0.0.1:${graphql.address().port}/graphql`;

// ---- the server, with both added
const dataDir = mkdtempSync(join(tmpdir(), "executor-bench-upstream-"));
// Asynchronous: the GraphQL engine introspected here lives in this process.
const cli = (...args) => new Promise((resolve, reject) =>
  execFile(BIN, [...args, "--data-dir", dataDir], { encoding: "utf8", env: { ...process.env, RUST_LOG: "warn" } },
    (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout))));
const bearer = (await cli("token", "create", "--email", "bench@example.com")).trim();
await cli("integrations", "add", "mcp", "--url", everythingUrl, "--namespace", "ev", "--allow-local-network");
await cli("integrations", "add", "graphql", "--endpoint", graphqlUrl, "--namespace", "gql", "--allow-local-network");
const port = await freePort();
const server = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--allow-local-network"], {
  stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, RUST_LOG: "warn" },
});
for (let i = 0; i < 100; i++) { try { if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break; } catch {} await sleep(50); }
const executor = new Client({ name: "bench", version: "1" });
await executor.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }));
const execute = async (code) => {
  const r = await executor.callTool({ name: "execute", arguments: { code } }, undefined, { timeout: 600_000 });
  if (r.isError || !r.structuredContent?.result?.ok && r.structuredContent?.result?.ok !== undefined) throw new Error(JSON.stringify(r).slice(0, 500));
  return r.structuredContent.result;
};
const meanInside = (call) => execute(`
  for (let i = 0; i < 20; i++) await ${call};
  const t = Date.now();
  for (let i = 0; i < ${N}; i++) { const r = await ${call}; if (!r.ok) throw new Error(JSON.stringify(r.error)); }
  return (Date.now() - t) / ${N};`);

// ---- MCP: direct with the TypeScript SDK, then through execute
const direct = new Client({ name: "bench-direct", version: "1" });
await direct.connect(new StreamableHTTPClientTransport(new URL(everythingUrl)));
for (let i = 0; i < 20; i++) await direct.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } });
let t = performance.now();
for (let i = 0; i < N; i++) await direct.callTool({ name: "get-sum", arguments: { a: i, b: 2 } });
const directMcp = (performance.now() - t) / N;
await direct.close();
const viaMcp = await meanInside("tools.ev.get_sum({ a: 1, b: 2 })");
line("MCP get_sum direct (TS SDK client, warm session), mean", directMcp.toFixed(3), "ms");
line("MCP get_sum through execute (pooled session), mean", viaMcp.toFixed(3), "ms");
line("  added by the gateway", (viaMcp - directMcp).toFixed(3), "ms");

// ---- sessions for 1,000 calls: 500 sequential, then 500 in waves of 8
const before = sessionsOpened();
await execute(`for (let i = 0; i < 500; i++) await tools.ev.get_sum({ a: i, b: 1 }); return 1;`);
await execute(`
  for (let w = 0; w < 500 / 8; w++) {
    const wave = [];
    for (let i = 0; i < 8; i++) wave.push(tools.ev.get_sum({ a: w, b: i }));
    await Promise.all(wave);
  }
  return 1;`);
line("upstream sessions opened for 1,000 calls (peak 8 in parallel)", sessionsOpened() - before);

// ---- GraphQL: a direct POST, then through execute
const body = JSON.stringify({ query: "query Version { version }", operationName: "Version" });
const postOnce = () => fetch(graphqlUrl, { method: "POST", headers: { "content-type": "application/json", accept: "application/json" }, body }).then((r) => r.json());
for (let i = 0; i < 20; i++) await postOnce();
t = performance.now();
for (let i = 0; i < N; i++) await postOnce();
const directGql = (performance.now() - t) / N;
const viaGql = await meanInside("tools.gql.query.version({})");
line("GraphQL query direct (fetch POST from Node), mean", directGql.toFixed(3), "ms");
line("GraphQL query through execute, mean", viaGql.toFixed(3), "ms");
line("  added by the gateway", (viaGql - directGql).toFixed(3), "ms");

// ---- GitHub's GraphQL schema: import time, then the server's memory
const rssBefore = rssMb(server.pid);
t = performance.now();
const imported = await cli("integrations", "add", "graphql", "--endpoint", "https://api.github.com/graphql", "--schema", GITHUB_SDL, "--namespace", "github");
const importS = (performance.now() - t) / 1000;
const githubTools = imported.match(/(\d+) tools/)?.[1];
t = performance.now();
const found = await execute(`return (await tools.search({ query: 'create issue' })).items[0].path`);
const firstMs = performance.now() - t;
line(`import GitHub's GraphQL schema, ${githubTools} tools (CLI, whole command)`, importS.toFixed(2), "s");
line("first execute after it (loads and searches its catalog)", firstMs.toFixed(0), `ms (found ${found})`);
line("server RSS before → after", `${rssBefore.toFixed(0)} → ${rssMb(server.pid).toFixed(0)}`, "MB");

await executor.close();
server.kill("SIGTERM");
everything.kill("SIGKILL");
graphql.close();
await sleep(300);
rmSync(dataDir, { recursive: true, force: true });
