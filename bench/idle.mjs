// 300 sessions × 10 executions across idle, ours against the peer; see
// bench/idle. Every execution is a raw HTTP POST of tools/call execute
// "return 1"; a round runs every session once, CONNS at a time, then the
// harness waits past the idle timeout before the next round.
import http from "node:http";
import { startOurs, startPeer, initSession, messagesOf, sleep } from "./lib.mjs";

const SESSIONS = Number(process.env.SESSIONS ?? 300);
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const IDLE_MS = Number(process.env.IDLE_MS ?? 1000);
const CONNS = Number(process.env.CONNS ?? 16);
const STORE = process.env.BENCH_STORE ?? "sqlite";
const WARM_REQUESTS = Number(process.env.WARM_REQUESTS ?? 3000);

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

// node:http with a keep-alive agent, CONNS sockets: a raw client whose own
// cost per request is small next to either server's (fetch's is not: at 16
// in flight it alone costs more than a millisecond per request).
const agent = new http.Agent({ keepAlive: true, maxSockets: CONNS });
const post = (url, bearer, sessionId, message) =>
  new Promise((resolve, reject) => {
    const body = JSON.stringify(message);
    const req = http.request(url, {
      method: "POST", agent,
      headers: {
        authorization: `Bearer ${bearer}`, "content-type": "application/json",
        accept: "application/json, text/event-stream", "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-06-18", "content-length": Buffer.byteLength(body),
      },
    }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });

const execute = { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "execute", arguments: { code: "return 1;" } } };

const measure = async (t) => {
  const bearer = t.mint("idle@example.com");
  const sessions = [];
  for (let i = 0; i < SESSIONS; i += CONNS) {
    const wave = await Promise.all(Array.from({ length: Math.min(CONNS, SESSIONS - i) }, () => initSession(t.mcpUrl, bearer)));
    sessions.push(...wave.map((w) => w.sessionId));
  }
  const latencies = [], firstRound = [], later = [];
  let errors = 0, firstError = "";
  for (let round = 0; round < ROUNDS; round++) {
    if (round > 0) await sleep(IDLE_MS * 1.5 + 250);
    let next = 0;
    const worker = async () => {
      while (next < sessions.length) {
        const sid = sessions[next++];
        const t0 = performance.now();
        let ok = false, detail = "";
        try {
          const r = await post(t.mcpUrl, bearer, sid, execute);
          const m = messagesOf(r.body).find((x) => x.id === 7);
          ok = r.status === 200 && m?.result?.content?.[0]?.text === "1";
          detail = `${r.status} ${r.body.slice(0, 200)}`;
        } catch (e) {
          detail = String(e);
        }
        const ms = performance.now() - t0;
        if (!ok) { errors++; firstError ||= detail; continue; }
        latencies.push(ms);
        (round === 0 ? firstRound : later).push(ms);
      }
    };
    await Promise.all(Array.from({ length: CONNS }, worker));
  }
  let restore = "";
  try {
    const metrics = await (await fetch(`${t.base}/metrics`)).text();
    const get = (name) => Number(metrics.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)`, "m"))?.[1]);
    const mean = get("executor_session_restore_seconds_sum") / get("executor_session_restore_seconds_count");
    if (Number.isFinite(mean)) restore = `restores ${get("executor_session_restore_seconds_count")}, server-side mean ${(mean * 1000).toFixed(3)} ms`;
  } catch {}
  return { latencies, firstRound, later, errors, firstError, restore };
};

const line = (name, r) => {
  const f = (xs, p) => (xs.length ? pct(xs, p).toFixed(2) : "-");
  console.log(
    `${name.padEnd(16)} p50 ${f(r.latencies, 50)} ms  p99 ${f(r.latencies, 99)} ms  max ${f(r.latencies, 100)} ms` +
      `  (first round p99 ${f(r.firstRound, 99)}, after idle p50 ${f(r.later, 50)} p99 ${f(r.later, 99)})` +
      `  ok ${r.latencies.length}  errors ${r.errors}${r.restore ? "  " + r.restore : ""}`,
  );
  if (r.errors) console.log(`  first error: ${r.firstError}`);
};

// The client's own code warms up first (JIT), against a server in this
// process that answers every request with the same SSE answer: otherwise
// the server measured first meets a cold client in its first round, and
// the one measured second a warm one.
const warmClient = async () => {
  const answer = `id: w:0\nretry: 1000\ndata: \n\nid: w:1\nevent: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: 7, result: { content: [{ type: "text", text: "1" }] } })}\n\n`;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => { res.writeHead(200, { "content-type": "text/event-stream" }); res.end(answer); });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}/mcp`;
  let left = WARM_REQUESTS;
  const worker = async () => {
    while (left-- > 0) messagesOf((await post(url, "warm", "warm", execute)).body);
  };
  await Promise.all(Array.from({ length: CONNS }, worker));
  agent.destroy();
  await new Promise((r) => server.close(r));
};
await warmClient();

const ours = await startOurs({ args: ["--session-idle-timeout", String(IDLE_MS)] });
let a, b;
try { a = await measure(ours); } finally { await ours.cleanup(); }
// PEER=0: ours alone, for comparing two builds or settings of ours.
if (process.env.PEER !== "0") {
  const peer = await startPeer();
  try { b = await measure(peer); } finally { await peer.cleanup(); }
}
console.log(`${SESSIONS} sessions × ${ROUNDS} executions, ${CONNS} in flight, ${IDLE_MS * 1.5 + 250} ms idle between rounds (ours on ${STORE}, idle timeout ${IDLE_MS} ms)`);
line(`ours (${STORE})`, a);
if (b) {
  line("peer", b);
  const adv = pct(b.latencies, 99) / pct(a.latencies, 99);
  console.log(`p99 advantage (peer / ours): x${adv.toFixed(2)}`);
}
process.exit(a.errors === 0 ? 0 : 1);
