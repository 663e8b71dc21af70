// What an upstream answer near the read bound costs the host (issue 41 §4):
// for each kind of integration (OpenAPI, GraphQL, MCP over streamable HTTP
// and over stdio), a fresh server calls a tool whose answer is just under
// --max-upstream-response-bytes (8 MiB), from a program that returns only
// its length. It prints the server's RSS before the call, its peak during
// it (VmHWM, reset before the call through /proc/PID/clear_refs), and the
// RSS after, as a Markdown table. See bench/answer-rss.
import http from "node:http";
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { startServer, connectSdk, freePort, waitUntil, sleep, BIN } from "../tests/e2e/harness.mjs";

// The GraphQL engine is the end-to-end suite's (tests/e2e/node_modules).
const e2eRequire = createRequire(new URL("../tests/e2e/package.json", import.meta.url));
const { buildSchema } = e2eRequire("graphql");
const { createHandler } = e2eRequire("graphql-http/lib/use/http");

const BYTES = Number(process.env.BYTES ?? 8 * 1024 * 1024 - 64 * 1024);
const MCP_FIXTURE = fileURLToPath(new URL("../tests/e2e/fixtures/mcp-upstream.mjs", import.meta.url));
const RUNS = Number(process.env.RUNS ?? 3);
const ORG = "bench";

const listen = async (handler) => {
  const server = http.createServer(handler);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return server;
};

/** An OpenAPI upstream: GET /big?bytes=N answers {"text": "xxx…"}. */
const openapi = async (srv) => {
  const api = await listen((req, res) => {
    const n = Number(new URL(req.url, "http://x").searchParams.get("bytes"));
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ text: "x".repeat(n) }));
  });
  const spec = {
    openapi: "3.0.3",
    info: { title: "big", version: "1" },
    paths: {
      "/big": {
        get: {
          operationId: "big",
          tags: ["big"],
          parameters: [{ name: "bytes", in: "query", required: true, schema: { type: "integer" } }],
          responses: { 200: { description: "ok" } },
        },
      },
    },
  };
  const file = join(srv.dataDir, "big.json");
  writeFileSync(file, JSON.stringify(spec));
  await cli(srv, "integrations", "add", "openapi", "--spec", file, "--namespace", "up", "--base-url", `http://127.0.0.1:${api.address().port}`);
  return { call: (n) => `await tools.up.big.big({ bytes: ${n} })`, length: (data) => data.text.length, close: () => api.close() };
};

/** A GraphQL upstream: `big(bytes)` answers a string of that length. */
const graphql = async (srv) => {
  const api = await listen(
    createHandler({
      schema: buildSchema("type Query { big(bytes: Int!): String }"),
      rootValue: { big: ({ bytes }) => "x".repeat(bytes) },
    }),
  );
  await cli(srv, "integrations", "add", "graphql", "--endpoint", `http://127.0.0.1:${api.address().port}/graphql`, "--namespace", "up", "--allow-local-network");
  return { call: (n) => `await tools.up.query.big({ bytes: ${n} })`, length: (data) => data.length, close: () => api.close() };
};

/** The MCP test upstream over streamable HTTP (JSON answers). */
const mcpHttp = async (srv) => {
  const { spawn } = await import("node:child_process");
  const port = await freePort();
  const child = spawn(process.execPath, [MCP_FIXTURE, "http", String(port)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  await waitUntil("the MCP upstream listening", () => /listening on port/.test(out), { ms: 15_000 });
  await cli(srv, "integrations", "add", "mcp", "--url", `http://127.0.0.1:${port}/mcp`, "--allow-local-network", "--namespace", "up");
  return { call: (n) => `await tools.up.big({ bytes: ${n} })`, length: (data) => data.content[0].text.length, close: () => child.kill("SIGKILL") };
};

/** The MCP test upstream over stdio (one child per node). */
const mcpStdio = async (srv) => {
  await cli(srv, "integrations", "add", "mcp", "--command", process.execPath, "--arg", MCP_FIXTURE, "--namespace", "up");
  return { call: (n) => `await tools.up.big({ bytes: ${n} })`, length: (data) => data.content[0].text.length, close: () => {} };
};

const cli = (srv, ...args) =>
  new Promise((resolve, reject) =>
    execFile(BIN, [...args, "--org", ORG, "--data-dir", srv.dataDir], { env: srv.env, maxBuffer: 1 << 24 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${args.join(" ")}: ${stderr}`)) : resolve(stdout),
    ),
  );

const status = (pid) => readFileSync(`/proc/${pid}/status`, "utf8");
const kb = (text, field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(text)[1]);
const mb = (kbytes) => (kbytes / 1024).toFixed(1);

console.log(`answer: ${BYTES} bytes (the read bound is 8,388,608); ${RUNS} calls each, the worst one shown`);
console.log("| kind | RSS before (MB) | peak during the call (MB) | peak − before (MB) | RSS after (MB) |");
console.log("|---|---|---|---|---|");
for (const [name, kind] of [["OpenAPI", openapi], ["GraphQL", graphql], ["MCP, streamable HTTP", mcpHttp], ["MCP, stdio", mcpStdio]]) {
  const srv = await startServer({ args: ["--allow-local-network", "--allow-stdio-integrations"], idleMs: 600_000 });
  const bearer = srv.mint("rss@bench.test", ORG);
  const upstream = await kind(srv);
  const { client } = await connectSdk(srv, bearer);
  const run = async (n) => {
    // The program returns the envelope with its data's length only.
    const length = upstream.length.toString();
    const code = `const r = ${upstream.call(n)}; return r.ok ? { ok: true, length: (${length})(r.data) } : r`;
    const r = await client.callTool({ name: "execute", arguments: { code } }, undefined, { timeout: 120_000 });
    if (r.isError || r.structuredContent?.result?.length !== n) throw new Error(`${name}: ${JSON.stringify(r).slice(0, 500)}`);
  };
  // Warm: the upstream's session or child, the catalog, the sandbox pool.
  await run(1000);
  await run(1000);
  let worst;
  for (let i = 0; i < RUNS; i++) {
    await sleep(500);
    const before = kb(status(srv.child.pid), "VmRSS");
    writeFileSync(`/proc/${srv.child.pid}/clear_refs`, "5");
    await run(BYTES);
    const peak = kb(status(srv.child.pid), "VmHWM");
    await sleep(500);
    const after = kb(status(srv.child.pid), "VmRSS");
    if (!worst || peak - before > worst.peak - worst.before) worst = { before, peak, after };
  }
  console.log(`| ${name} | ${mb(worst.before)} | ${mb(worst.peak)} | ${mb(worst.peak - worst.before)} | ${mb(worst.after)} |`);
  await client.close().catch(() => {});
  upstream.close();
  await srv.cleanup();
}
process.exit(0);
