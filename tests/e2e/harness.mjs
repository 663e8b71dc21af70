// End-to-end harness: runs the real `executor` binary on a free loopback port
// with a throw-away data dir, mints bearers through its CLI, and talks to it
// raw (node:http, so Host, odd methods and streaming are all under our
// control) or through the official MCP SDK clients.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, existsSync, rmSync, mkdirSync, createWriteStream, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import http from "node:http";
import assert from "node:assert/strict";
import net from "node:net";
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const HERE = dirname(fileURLToPath(import.meta.url));
export const BIN = process.env.EXECUTOR_BIN
  ? resolve(process.env.EXECUTOR_BIN)
  : resolve(HERE, "../../target/release/executor");

/** Session idle timeout used by default in the suite (ms). */
export const IDLE_MS = Number(process.env.E2E_IDLE_MS ?? 1500);
/** How long to wait so that an idle runtime has surely been disposed. */
export const PAST_IDLE_MS = IDLE_MS + Math.max(1500, IDLE_MS);

export const SESSION_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"];
export const NEWEST_SESSION_VERSION = "2025-11-25";
export const SESSIONLESS_VERSION = "2026-07-28";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export const freePort = () =>
  new Promise((res, rej) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => res(port));
    });
    srv.on("error", rej);
  });

const LOG_DIR = join(tmpdir(), "executor-e2e-logs");

const waitHealthy = async (base, child, ms = 30_000) => {
  const deadline = Date.now() + ms;
  let last = "";
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`server exited early (${child.exitCode ?? child.signalCode})`);
    try {
      const r = await request(`${base}/healthz`, { method: "GET", timeoutMs: 2000 });
      if (r.status === 200) return r;
      last = `status ${r.status}`;
    } catch (e) {
      last = e.message;
    }
    await sleep(50);
  }
  throw new Error(`server not healthy at ${base}/healthz within ${ms} ms (${last})`);
};

// ---------------------------------------------------------------- stores

/**
 * EXECUTOR_TEST_STORE=postgres runs every server of the suite on PostgreSQL
 * (EXECUTOR_TEST_POSTGRES, default the machine's trust-auth server): each
 * startServer gets a database of its own, created here with psql and
 * dropped by cleanup(), and a random EXECUTOR_SECRET_KEY that serve and
 * every s.cli() share (a shared store never makes up a key).
 */
export const STORE = process.env.EXECUTOR_TEST_STORE === "postgres" ? "postgres" : "sqlite";
export const PG_ADMIN = process.env.EXECUTOR_TEST_POSTGRES || "postgres://postgres@127.0.0.1:5432/postgres";

const psql = (sql, url = PG_ADMIN) =>
  execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-qtAc", sql], { encoding: "utf8", timeout: 30_000 });

/** `PG_ADMIN` with its database replaced by `name`. */
export const pgUrl = (name) => {
  const url = new URL(PG_ADMIN);
  url.pathname = `/${name}`;
  return url.toString();
};

/** A new database and key for one server: the env that selects them, and drop(). */
export const pgStore = () => {
  const name = `executor_e2e_${process.pid}_${randomBytes(4).toString("hex")}`;
  psql(`CREATE DATABASE ${name}`);
  return {
    name,
    url: pgUrl(name),
    env: { EXECUTOR_DATABASE_URL: pgUrl(name), EXECUTOR_SECRET_KEY: randomBytes(32).toString("hex") },
    sql: (statement) => psql(statement, pgUrl(name)),
    drop: () => {
      try {
        psql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } catch {}
    },
  };
};

/**
 * Start the server. Returns an object with base, mcpUrl, port, dataDir, and
 * mint(email, org?), revoke(token), kill9(), restart(), stop(), cleanup(), logTail().
 */
export const startServer = async ({ idleMs = IDLE_MS, args = [], env = {}, dataDir, port, store = STORE } = {}) => {
  if (!existsSync(BIN)) throw new Error(`no executor binary at ${BIN} (set EXECUTOR_BIN or build it)`);
  // A data dir given is another server's (a second node on it): cleanup
  // leaves it to its owner.
  const ownsDataDir = dataDir === undefined;
  dataDir ??= mkdtempSync(join(tmpdir(), "executor-e2e-"));
  port ??= await freePort();
  mkdirSync(LOG_DIR, { recursive: true });
  const logPath = join(LOG_DIR, `server-${port}-${Date.now()}.log`);
  const logFile = createWriteStream(logPath, { flags: "a" });
  const base = `http://127.0.0.1:${port}`;
  const s = { base, origin: base, mcpUrl: `${base}/mcp`, port, dataDir, logPath, log: "", child: null };
  const pg = store === "postgres" ? pgStore() : null;
  s.pg = pg;
  const runEnv = { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "info", ...(pg?.env ?? {}), ...env };
  s.env = runEnv;
  const launch = async () => {
    const child = spawn(
      BIN,
      ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--session-idle-timeout", String(idleMs), ...args],
      { env: runEnv, stdio: ["ignore", "pipe", "pipe"] },
    );
    const keep = (d) => {
      // The child's last output can arrive after its exit, and after
      // cleanup closed the file: the log keeps what it can.
      if (!logFile.writableEnded) logFile.write(d);
      if (s.log.length < 4e6) s.log += d.toString();
      if (process.env.HARNESS_VERBOSE) process.stderr.write(d);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    s.child = child;
    // A port just released by a killed server can take a moment to rebind.
    await waitHealthy(base, child);
    return child;
  };
  await launch();
  // Synchronous: it blocks this process's event loop until the command
  // exits, so never use it for a command that needs an upstream served
  // from this process (recordingUpstream) to answer: use execFile.
  s.cli = (argv) =>
    execFileSync(BIN, argv, { encoding: "utf8", env: runEnv, stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 });
  s.mint = (email, org) => {
    const out = s.cli(["token", "create", "--email", email, ...(org ? ["--org", org] : []), "--data-dir", dataDir]);
    const lines = out.trim().split("\n");
    if (lines.length !== 1 || !lines[0].trim()) throw new Error(`token create must print the token alone, got ${JSON.stringify(out)}`);
    return lines[0].trim();
  };
  s.revoke = (token) => s.cli(["token", "revoke", token, "--data-dir", dataDir]);
  const exited = (child) =>
    child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve()
      : new Promise((r) => child.once("exit", () => r()));
  s.stop = async () => {
    const child = s.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    await Promise.race([exited(child), sleep(5000)]);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await exited(child);
    }
  };
  s.kill9 = async () => {
    const child = s.child;
    child.kill("SIGKILL");
    await exited(child);
  };
  s.restart = async () => {
    let lastErr;
    for (let i = 0; i < 3; i++) {
      try {
        return await launch();
      } catch (e) {
        lastErr = e;
        await sleep(300);
      }
    }
    throw lastErr;
  };
  s.logTail = (n = 30) => s.log.split("\n").slice(-n).join("\n");
  /** Everything the store holds, as text: the SQLite files, or a dump of the database. */
  s.storeDump = () =>
    pg
      ? execFileSync("pg_dump", ["--data-only", pg.url], { encoding: "latin1", maxBuffer: 1 << 28 })
      : readdirSync(dataDir)
          .filter((f) => f.startsWith("executor.db"))
          .map((f) => readFileSync(join(dataDir, f)).toString("latin1"))
          .join("");
  s.cleanup = async () => {
    await s.stop();
    pg?.drop();
    logFile.end();
    if (ownsDataDir && !process.env.E2E_KEEP) rmSync(dataDir, { recursive: true, force: true });
  };
  return s;
};

// ---------------------------------------------------------------- raw HTTP

const guarded = new WeakSet();

/**
 * One HTTP request with node:http. Resolves { status, headers, body, json }
 * once the whole body is read. `body` may be a string, a Buffer or an object
 * (JSON-encoded). `socket` may be an already connected net.Socket to use.
 */
export const request = (url, { method = "POST", headers = {}, body, timeoutMs = 20_000, socket } = {}) =>
  new Promise((resolveP, rejectP) => {
    const u = new URL(url);
    const payload = body === undefined ? undefined : typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const opts = { method, hostname: u.hostname, port: u.port, path: u.pathname + u.search, headers: { ...headers } };
    if (payload !== undefined && !Object.keys(opts.headers).some((k) => k.toLowerCase() === "content-length"))
      opts.headers["content-length"] = Buffer.byteLength(payload);
    if (socket) {
      opts.agent = false;
      opts.createConnection = () => socket;
    }
    const req = http.request(opts, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString("utf8");
        let json;
        try {
          json = JSON.parse(text);
        } catch {}
        resolveP({ status: res.statusCode, headers: res.headers, body: text, json });
      });
      res.on("error", (e) => {
        clearTimeout(timer);
        rejectP(e);
      });
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`${method} ${url}: no complete response within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on("error", (e) => {
      clearTimeout(timer);
      rejectP(e); // no-op when the response was already read
    });
    // A server that answers early (413) may close while we still write: the
    // socket error is reported through req's error, never as an uncaught one.
    req.on("socket", (sock) => {
      if (!guarded.has(sock)) {
        guarded.add(sock);
        sock.on("error", () => {});
      }
    });
    if (payload !== undefined) req.write(payload);
    req.end();
  });

/** Connect a TCP socket to 127.0.0.1:port and wait until it is connected. */
export const connectSocket = (port) =>
  new Promise((res, rej) => {
    const sock = net.connect({ host: "127.0.0.1", port });
    sock.once("connect", () => res(sock));
    sock.once("error", rej);
  });

/** Headers for an MCP POST. */
export const mcpHeaders = ({ bearer, sessionId, protocolVersion, accept = "application/json, text/event-stream", extra = {} } = {}) => {
  const h = { "content-type": "application/json", accept };
  if (bearer) h.authorization = `Bearer ${bearer}`;
  if (sessionId) h["mcp-session-id"] = sessionId;
  if (protocolVersion) h["mcp-protocol-version"] = protocolVersion;
  return { ...h, ...extra };
};

/** POST a JSON-RPC message (or raw string) to /mcp. */
export const post = (srv, message, { bearer, sessionId, protocolVersion, accept, extra, timeoutMs, socket } = {}) =>
  request(srv.mcpUrl, {
    method: "POST",
    headers: mcpHeaders({ bearer, sessionId, protocolVersion, accept, extra }),
    body: message,
    timeoutMs,
    socket,
  });

let rpcCounter = 1000;
export const rpc = (method, params, id = ++rpcCounter) => ({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
export const note = (method, params) => ({ jsonrpc: "2.0", method, ...(params === undefined ? {} : { params }) });

// ---------------------------------------------------------------- SSE

/** Parse one SSE event block (text between blank lines). */
const parseBlock = (block) => {
  const ev = { raw: block, id: undefined, event: undefined, data: undefined, comments: [] };
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (line === "") continue;
    if (line.startsWith(":")) {
      ev.comments.push(line.slice(1).trim());
      continue;
    }
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") ev.id = value;
    else if (field === "event") ev.event = value;
    else if (field === "data") data.push(value);
    else if (field === "retry") ev.retry = value;
  }
  if (data.length) ev.data = data.join("\n");
  ev.message = undefined;
  if (ev.data) {
    try {
      ev.message = JSON.parse(ev.data);
    } catch {}
  }
  return ev;
};

/** Split a complete SSE body into events (comment-only blocks included). */
export const parseSse = (text) =>
  text
    .split(/\r?\n\r?\n/)
    .filter((b) => b.trim() !== "")
    .map(parseBlock);

/** JSON-RPC messages of a JSON or SSE body. */
export const messagesOf = (res) => {
  const ct = String(res.headers?.["content-type"] ?? "");
  const t = res.body.trim();
  if (!t) return [];
  if (ct.includes("text/event-stream")) return parseSse(res.body).filter((e) => e.message).map((e) => e.message);
  const v = JSON.parse(t);
  return Array.isArray(v) ? v : [v];
};

/** The response to `id` in a JSON or SSE body (undefined when absent). */
export const responseTo = (res, id) => messagesOf(res).find((m) => m.id === id && ("result" in m || "error" in m));

/**
 * Open a streaming request (GET listen stream, or a POST whose SSE body we
 * read incrementally). Resolves once the response headers arrive (or rejects
 * after headersTimeoutMs). The returned stream has: status, headers, events,
 * text, ended, waitFor(pred, ms), close().
 */
export const openStream = (url, { method = "GET", headers = {}, body, headersTimeoutMs = 10_000, socket } = {}) =>
  new Promise((resolveP, rejectP) => {
    const u = new URL(url);
    const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    const opts = { method, hostname: u.hostname, port: u.port, path: u.pathname + u.search, headers: { ...headers } };
    if (payload !== undefined) opts.headers["content-length"] = Buffer.byteLength(payload);
    if (socket) {
      opts.agent = false;
      opts.createConnection = () => socket;
    } else {
      opts.agent = false; // a fresh connection per stream
    }
    const st = { status: 0, headers: {}, events: [], text: "", ended: false, error: undefined, waiters: [] };
    const notify = () => {
      for (const w of [...st.waiters]) w();
    };
    let buf = "";
    const req = http.request(opts, (res) => {
      clearTimeout(timer);
      st.status = res.statusCode;
      st.headers = res.headers;
      st.res = res;
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        st.text += chunk;
        buf += chunk;
        for (;;) {
          const m = /\r?\n\r?\n/.exec(buf);
          if (!m) break;
          const block = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          if (block.trim() !== "") st.events.push(parseBlock(block));
        }
        notify();
      });
      res.on("end", () => {
        st.ended = true;
        notify();
      });
      res.on("error", (e) => {
        st.error = e;
        st.ended = true;
        notify();
      });
      res.on("close", () => {
        st.ended = true;
        notify();
      });
      resolveP(st);
    });
    const timer = setTimeout(() => {
      req.destroy();
      rejectP(new Error(`${method} ${url}: response headers not received within ${headersTimeoutMs} ms`));
    }, headersTimeoutMs);
    req.on("error", (e) => {
      clearTimeout(timer);
      st.error = e;
      st.ended = true;
      notify();
      rejectP(e);
    });
    st.req = req;
    /** Wait until pred(events) returns a truthy value; resolves that value. */
    st.waitFor = (pred, ms = 10_000) =>
      new Promise((res, rej) => {
        const check = () => {
          const v = pred(st.events);
          if (v) {
            done();
            res(v);
          } else if (st.ended) {
            done();
            rej(new Error(`stream ended before the awaited event; got: ${JSON.stringify(st.text.slice(0, 2000))}`));
          }
        };
        const t = setTimeout(() => {
          done();
          rej(new Error(`awaited SSE event not seen within ${ms} ms; got: ${JSON.stringify(st.text.slice(0, 2000))}`));
        }, ms);
        const done = () => {
          clearTimeout(t);
          st.waiters = st.waiters.filter((w) => w !== check);
        };
        st.waiters.push(check);
        check();
      });
    st.close = () => {
      req.destroy();
      st.ended = true;
    };
    if (payload !== undefined) req.write(payload);
    req.end();
  });

/** Open the standalone GET stream of a session. */
export const openGet = (srv, { bearer, sessionId, protocolVersion, lastEventId, accept = "text/event-stream", extra = {}, socket, headersTimeoutMs } = {}) => {
  const headers = { accept };
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (sessionId) headers["mcp-session-id"] = sessionId;
  if (protocolVersion) headers["mcp-protocol-version"] = protocolVersion;
  if (lastEventId) headers["last-event-id"] = lastEventId;
  return openStream(srv.mcpUrl, { method: "GET", headers: { ...headers, ...extra }, socket, headersTimeoutMs });
};

/** Read the body of a (non-200) stream response completely. */
export const drain = (st, ms = 5000) =>
  st.ended ? Promise.resolve(st.text) : new Promise((res) => {
    const t = setTimeout(() => res(st.text), ms);
    st.waiters.push(() => {
      if (st.ended) {
        clearTimeout(t);
        res(st.text);
      }
    });
  });

/** `id: <stream-id>:<seq>` */
export const EVENT_ID_RE = /^(\S+):(\d+)$/;
export const splitEventId = (id) => {
  const m = EVENT_ID_RE.exec(id ?? "");
  return m ? { stream: m[1], seq: Number(m[2]) } : undefined;
};

// ---------------------------------------------------------------- sessions

export const clientInfo = { name: "executor-e2e", version: "0.0.1" };

/** Raw initialize + notifications/initialized. Returns { sessionId, res, result, protocolVersion }. */
export const initSession = async (srv, bearer, protocolVersion = "2025-06-18", { extra } = {}) => {
  const res = await post(
    srv,
    { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion, capabilities: {}, clientInfo } },
    { bearer, extra },
  );
  if (res.status !== 200) throw new Error(`initialize answered ${res.status}: ${res.body}`);
  const sessionId = res.headers["mcp-session-id"];
  if (!sessionId) throw new Error(`initialize answered without mcp-session-id: ${res.body}`);
  const msg = responseTo(res, 1);
  const negotiated = msg?.result?.protocolVersion;
  const n = await post(srv, note("notifications/initialized"), { bearer, sessionId, protocolVersion: negotiated });
  if (n.status !== 202) throw new Error(`notifications/initialized answered ${n.status}: ${n.body}`);
  return { sessionId, res, result: msg?.result, protocolVersion: negotiated };
};

export const randomSessionId = () => randomBytes(16).toString("hex");

/**
 * Connect the official SDK (1.x) client; pass sessionId to resume a session.
 * `listening()` resolves once the standalone GET stream the SDK opens after
 * `initialize` has delivered its priming event (so the server holds it).
 */
export const connectSdk = async (srv, bearer, { sessionId, name = "executor-e2e", query = "" } = {}) => {
  const client = new Client({ name, version: "0.0.1" }, { capabilities: {} });
  let primed;
  const opened = new Promise((r) => (primed = r));
  const transport = new StreamableHTTPClientTransport(new URL(srv.mcpUrl + query), {
    sessionId,
    requestInit: { headers: { authorization: `Bearer ${bearer}` } },
    reconnectionOptions: { maxReconnectionDelay: 1000, initialReconnectionDelay: 200, reconnectionDelayGrowFactor: 1.5, maxRetries: 0 },
    fetch: watchGetStream(() => primed()),
  });
  const errors = [];
  client.onerror = (e) => errors.push(e);
  await client.connect(transport);
  const listening = (ms = 10_000) => within(opened, ms, "the SDK client's GET stream sent no priming event");
  return { client, transport, errors, listening };
};

/** `fetch` that reads a copy of every GET stream and calls `onPrimed` at its first event id. */
const watchGetStream = (onPrimed) => async (url, init) => {
  const response = await fetch(url, init);
  if ((init?.method ?? "GET") !== "GET" || !response.ok || !response.body) return response;
  const [forClient, copy] = response.body.tee();
  (async () => {
    const reader = copy.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ done: true }));
      if (done) return;
      if (text !== undefined) {
        text += decoder.decode(value, { stream: true });
        if (/^id: ?\S/m.test(text)) {
          text = undefined; // primed; keep reading so the copy never holds the stream back
          onPrimed();
        }
      }
    }
  })();
  return new Response(forClient, { status: response.status, statusText: response.statusText, headers: response.headers });
};

/** Resolves like `promise`, or rejects with `what` after `ms`. */
export const within = (promise, ms, what) => {
  let timer;
  const late = new Promise((_, rej) => (timer = setTimeout(() => rej(new Error(`${what} (within ${ms} ms)`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
};

/**
 * Polls `check` (sync or async) until it returns a truthy value, which is
 * returned; fails after `ms` with `what` and the last value seen.
 */
export const waitUntil = async (what, check, { ms = 10_000, every = 50 } = {}) => {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await check();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
    await sleep(every);
  }
};

export const EXECUTE_ONE = { name: "execute", arguments: { code: "return 1;" } };

/** Body text shows nothing of the sticky-failure signature. */
export const noStickyFailure = (res) =>
  res.status < 500 && !/-32603/.test(res.body) && !/already connected/i.test(res.body);

// ---------------------------------------------------------------- metrics (§11)

/** Scrape /metrics; returns Map(name → summed value over label sets). */
export const scrapeMetrics = async (srv) => {
  const res = await request(`${srv.base}/metrics`, { method: "GET" });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const out = new Map();
  for (const line of res.body.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    out.set(m[1], (out.get(m[1]) ?? 0) + Number(m[3]));
  }
  return out;
};

/** The value of the one metric whose name matches re (throws when none or several). */
export const metricMatching = (metrics, re) => {
  const names = [...metrics.keys()].filter((n) => re.test(n));
  if (names.length !== 1) throw new Error(`expected one metric matching ${re}, found ${JSON.stringify(names)}`);
  return metrics.get(names[0]);
};
/** §11: sessions disposed / restored counters, found by name. */
export const DISPOSED_RE = /^executor_sessions?_disposed(_total)?$/;
export const RESTORED_RE = /^executor_sessions?_restored(_total)?$/;

// ------------------------------------------------------------ upstreams

/**
 * The npm prefix holding the real API specs (tests/specs), installed on
 * first use. A test that needs them fails when they are not there.
 */
export const specsDir = () => {
  const dir =
    process.env.EXECUTOR_SPECS_DIR || execFileSync(join(HERE, "..", "specs", "install"), { encoding: "utf8", timeout: 120_000 }).trim();
  if (!existsSync(join(dir, "node_modules")))
    throw new Error(`no spec packages in ${dir}: run tests/specs/install and set EXECUTOR_SPECS_DIR to the directory it prints`);
  return dir;
};

/**
 * A loopback HTTP server standing in for an integration's API: it records
 * every request ({method, url, headers, body}) in `seen`, defaults the
 * response to JSON, and lets `route(request, res)` answer. `seen` is emptied
 * in place (`seen.length = 0`), so tests keep one reference to it.
 */
export const recordingUpstream = async (route) => {
  const seen = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const request = { method: req.method, url: req.url, headers: req.headers, body };
      seen.push(request);
      res.setHeader("content-type", "application/json");
      route(request, res);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { seen, base: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
};

/** Runs `code` through `execute` and returns its result; the run must complete without a tool error. */
export const runOk = async (client, code, transcript) => {
  const r = await client.callTool({ name: "execute", arguments: { code } });
  transcript?.push(JSON.stringify(r));
  assert.equal(r.isError, undefined, `execute failed: ${JSON.stringify(r).slice(0, 2000)}`);
  return r.structuredContent.result;
};

