// The big-catalog benchmark; run through bench/catalog, which installs the
// specs. Prints a table: after each step, the server's RSS and the first
// `execute` after the change; the peak RSS and time of each import; then
// search and describe over the whole catalog.
import { spawn, spawnSync, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import net from "node:net";

const ROOT = new URL("..", import.meta.url).pathname;
const BIN = process.env.EXECUTOR_BIN ?? join(ROOT, "target/release/executor");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
});
const rssMb = (pid) => Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]) / 1024;
const mb = (path) => statSync(path).size / 1024 / 1024;

const dataDir = mkdtempSync(join(tmpdir(), "executor-catalog-bench-"));
const port = await freePort();
const url = `http://127.0.0.1:${port}/mcp`;
const child = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir], {
  stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "warn" },
});
for (let i = 0; i < 100; i++) { try { if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break; } catch {} await sleep(50); }
const bearer = execFileSync(BIN, ["token", "create", "--email", "bench@example.com", "--data-dir", dataDir], { encoding: "utf8" }).trim();
const headers = { authorization: `Bearer ${bearer}`, "content-type": "application/json", accept: "application/json", "mcp-protocol-version": "2025-06-18" };
const rpc = async (sid, body) => {
  const r = await fetch(url, { method: "POST", headers: { ...headers, ...(sid ? { "mcp-session-id": sid } : {}) }, body: JSON.stringify(body) });
  return { sid: r.headers.get("mcp-session-id"), body: await r.json() };
};
const { sid } = await rpc(null, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "1" } } });
const execute = async (code) => {
  const t = performance.now();
  const { body } = await rpc(sid, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "execute", arguments: { code } } });
  const ms = performance.now() - t;
  if (body.result?.isError) throw new Error(JSON.stringify(body.result));
  return { ms, result: body.result?.structuredContent?.result };
};
const rows = [];
const row = (step, cols) => { rows.push({ step, ...cols }); console.log(step.padEnd(34), Object.entries(cols).map(([k, v]) => `${k} ${v}`).join("  ")); };
const firstExecute = () => execute(`const r = await tools.search({ query: "list users" }); return r.items.length;`);
const settle = async () => { await sleep(1500); return rssMb(child.pid); };

const importSpec = (args) => {
  const timed = spawnSync("/usr/bin/time", ["-v", BIN, "integrations", ...args, "--data-dir", dataDir], { encoding: "utf8" });
  if (timed.status !== 0) throw new Error(timed.stderr);
  const peak = Number(timed.stderr.match(/Maximum resident set size \(kbytes\): (\d+)/)?.[1] ?? NaN) / 1024;
  const secs = Number(timed.stdout.match(/tools in ([\d.]+) s/)?.[1] ?? NaN);
  const tools = Number(timed.stdout.match(/(\d+) tools/)?.[1] ?? NaN);
  return { peak, secs, tools };
};

try {
  await firstExecute();
  const empty = await settle();
  row("empty server", { "RSS MB": empty.toFixed(0) });
  const steps = [
    ["+ GitHub", ["add", "openapi", "--spec", process.env.GITHUB_SPEC, "--namespace", "github"], process.env.GITHUB_SPEC],
    ["+ Graph v1.0", ["add", "openapi", "--spec", process.env.GRAPH_SPEC, "--namespace", "graph"], process.env.GRAPH_SPEC],
    ["+ Graph beta", ["add", "openapi", "--spec", process.env.GRAPH_BETA_SPEC, "--namespace", "graphbeta"], process.env.GRAPH_BETA_SPEC],
    ["+ integrations refresh github", ["refresh", "github"], null],
  ];
  let specMb = 0;
  for (const [step, args, spec] of steps) {
    if (spec) specMb += mb(spec);
    const imported = importSpec(args);
    const first = await firstExecute();
    const second = await firstExecute();
    const rss = await settle();
    row(step, {
      tools: imported.tools, "import s": imported.secs.toFixed(2), "import peak MB": imported.peak.toFixed(0),
      "first execute ms": first.ms.toFixed(0), "next execute ms": second.ms.toFixed(1),
      "RSS MB": rss.toFixed(0), "above empty MB": (rss - empty).toFixed(0),
    });
  }
  console.log(`specs' JSON size: ${specMb.toFixed(0)} MB; RSS target 1.5x = ${(1.5 * specMb).toFixed(0)} MB`);
  const queries = ["list users", "create an issue", "send mail", "get a calendar event", "list pull requests", "delete a group member", "update a drive item", "list teams channels"];
  const searched = await execute(`
    const queries = ${JSON.stringify(queries)};
    const rounds = 20; const times = [];
    for (let i = 0; i < rounds; i++) for (const query of queries) {
      const t = Date.now(); await tools.search({ query }); times.push(Date.now() - t);
    }
    times.sort((a, b) => a - b);
    const total = (await tools.search({ query: "" , limit: 1 })).total;
    return { p50: times[Math.floor(times.length / 2)], mean: times.reduce((a, b) => a + b, 0) / times.length, total };`);
  row("tools.search over the catalog", { tools: searched.result.total ?? "?", "p50 ms": searched.result.p50, "mean ms": searched.result.mean.toFixed(2) });
  const described = await execute(`
    const [hit] = (await tools.search({ query: "update user", namespace: "graphbeta", limit: 1 })).items;
    const t = Date.now(); const d = await tools.describe.tool({ path: hit.path });
    return { ms: Date.now() - t, path: d.path, chars: JSON.stringify(d).length };`);
  row(`tools.describe.tool ${described.result.path}`, { ms: described.result.ms, "answer chars": described.result.chars });
} finally {
  child.kill("SIGTERM");
  await sleep(300);
  rmSync(dataDir, { recursive: true, force: true });
}
