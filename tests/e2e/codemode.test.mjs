// Code mode (SPEC §5-§7) end to end: every case of tests/corpus/execute.json
// through the official SDK client, then the adversarial runs that do not fit
// a table (limits, concurrency, recovery).
//
// Corpus format (shared with the engine-level Rust runner):
//   { name, note?, code, expect }       exact CallToolResult (content,
//                                       structuredContent, isError when true)
//   { name, note?, code, expectMatch }  for texts that cannot be fixed:
//     isError?: bool         (result.isError === true) must equal it
//     textIncludes?: [str]   each must be a substring of some text block
//     structured?: value     partial deep match against structuredContent:
//                            objects: every listed key matches recursively
//                            (unlisted keys are ignored); arrays: same length,
//                            element-wise; scalars: strict equality
//     logsIncludes?: [str]   each must be a substring of some entry of
//                            structuredContent.logs
// Cases run in file order on one session; order matters where a case's note
// says so (the "state 1/2", "state 2/2" pair checks that nothing leaks from
// one execution to the next).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import { startServer, connectSdk, request } from "./harness.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const CORPUS = JSON.parse(readFileSync(join(HERE, "../corpus/execute.json"), "utf8"));
const TIMEOUT_MS = 2000;
const TIMED_OUT = `Error: execution timed out after ${TIMEOUT_MS} ms`;

let srv;
let bearer;
let client;

before(async () => {
  srv = await startServer({ args: ["--execution-timeout", String(TIMEOUT_MS)] });
  bearer = srv.mint("codemode@example.com");
  ({ client } = await connectSdk(srv, bearer, { name: "codemode" }));
});

after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
});

const execute = (code, c = client) => c.callTool({ name: "execute", arguments: { code } });

// ---------------------------------------------------------------- matching

const show = (v, n = 300) => {
  const s = JSON.stringify(v);
  if (s === undefined) return String(v);
  return s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s;
};

/** First difference between actual and expected, as "path: actual vs expected". */
const firstDiff = (a, e, path = "$") => {
  if (isDeepStrictEqual(a, e)) return undefined;
  if (typeof a === "string" && typeof e === "string") {
    let i = 0;
    while (i < a.length && i < e.length && a[i] === e[i]) i++;
    return `${path}: strings differ at index ${i} (lengths ${a.length} vs ${e.length}): actual ${show(a.slice(Math.max(0, i - 40), i + 80))} vs expected ${show(e.slice(Math.max(0, i - 40), i + 80))}`;
  }
  if (Array.isArray(a) && Array.isArray(e)) {
    if (a.length !== e.length) return `${path}: array length ${a.length} vs expected ${e.length}: actual ${show(a)}`;
    for (let i = 0; i < e.length; i++) {
      const d = firstDiff(a[i], e[i], `${path}[${i}]`);
      if (d) return d;
    }
  }
  if (a && e && typeof a === "object" && typeof e === "object" && !Array.isArray(a) && !Array.isArray(e)) {
    for (const k of new Set([...Object.keys(e), ...Object.keys(a)])) {
      if (!(k in a)) return `${path}.${k}: missing (expected ${show(e[k])})`;
      if (!(k in e)) return `${path}.${k}: unexpected ${show(a[k])}`;
      const d = firstDiff(a[k], e[k], `${path}.${k}`);
      if (d) return d;
    }
    const ak = Object.keys(a).join(","), ek = Object.keys(e).join(",");
    if (ak !== ek) return `${path}: key order ${ak} vs expected ${ek}`;
  }
  return `${path}: actual ${show(a)} vs expected ${show(e)}`;
};

/** Partial deep match (see the header); returns the first mismatch or undefined. */
const partialMismatch = (a, e, path = "$") => {
  if (Array.isArray(e)) {
    if (!Array.isArray(a)) return `${path}: expected an array, got ${show(a)}`;
    if (a.length !== e.length) return `${path}: array length ${a.length} vs expected ${e.length}: ${show(a)}`;
    for (let i = 0; i < e.length; i++) {
      const d = partialMismatch(a[i], e[i], `${path}[${i}]`);
      if (d) return d;
    }
    return undefined;
  }
  if (e !== null && typeof e === "object") {
    if (a === null || typeof a !== "object" || Array.isArray(a)) return `${path}: expected an object, got ${show(a)}`;
    for (const k of Object.keys(e)) {
      if (!(k in a)) return `${path}.${k}: missing`;
      const d = partialMismatch(a[k], e[k], `${path}.${k}`);
      if (d) return d;
    }
    return undefined;
  }
  return a === e ? undefined : `${path}: actual ${show(a)} vs expected ${show(e)}`;
};

const texts = (r) => (r.content ?? []).filter((b) => b.type === "text").map((b) => b.text);

const checkMatch = (r, m) => {
  const problems = [];
  if (m.isError !== undefined && (r.isError === true) !== m.isError)
    problems.push(`isError is ${r.isError}, expected ${m.isError}`);
  for (const s of m.textIncludes ?? [])
    if (!texts(r).some((t) => t.includes(s))) problems.push(`no text block includes ${show(s)}`);
  if (m.structured !== undefined) {
    const d = partialMismatch(r.structuredContent, m.structured, "structuredContent");
    if (d) problems.push(d);
  }
  for (const s of m.logsIncludes ?? [])
    if (!(r.structuredContent?.logs ?? []).some((l) => l.includes(s))) problems.push(`no log line includes ${show(s)}`);
  return problems;
};

// ---------------------------------------------------------------- the corpus

test("codemode corpus: well-formed", () => {
  assert.ok(Array.isArray(CORPUS) && CORPUS.length >= 60, `corpus has ${CORPUS.length} cases`);
  const names = new Set();
  for (const c of CORPUS) {
    assert.equal(typeof c.name, "string");
    assert.ok(!names.has(c.name), `duplicate case name ${c.name}`);
    names.add(c.name);
    assert.equal(typeof c.code, "string", c.name);
    assert.ok(("expect" in c) !== ("expectMatch" in c), `${c.name}: exactly one of expect / expectMatch`);
  }
});

for (const c of CORPUS) {
  test(`codemode corpus: ${c.name}`, async () => {
    let r;
    try {
      r = await execute(c.code);
    } catch (e) {
      // E.g. the SDK refusing a CallToolResult that fails its schema.
      assert.fail(`${c.name}\n  code: ${show(c.code, 200)}\n  callTool threw: ${String(e?.message ?? e).slice(0, 600)}${c.note ? `\n  note: ${c.note}` : ""}`);
    }
    if (c.expect !== undefined) {
      const d = firstDiff(r, c.expect);
      if (d) assert.fail(`${c.name}\n  code: ${show(c.code, 200)}\n  ${d}${c.note ? `\n  note: ${c.note}` : ""}`);
    } else {
      const problems = checkMatch(r, c.expectMatch);
      if (problems.length)
        assert.fail(`${c.name}\n  code: ${show(c.code, 200)}\n  ${problems.join("\n  ")}\n  actual: ${show(r, 600)}${c.note ? `\n  note: ${c.note}` : ""}`);
    }
  });
}

// ---------------------------------------------------------------- adversarial

/** The session, the server and a second session all still answer. */
const stillHealthy = async (label) => {
  const h = await request(`${srv.base}/healthz`, { method: "GET" });
  assert.equal(h.status, 200, `${label}: /healthz answered ${h.status}`);
  const r = await execute("return 6 * 7;");
  assert.deepEqual(r.content, [{ type: "text", text: "42" }], `${label}: same session no longer answers: ${show(r)}`);
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === "execute"), `${label}: tools/list lost execute`);
};

const assertError = (r, re, label) => {
  assert.equal(r.isError, true, `${label}: expected an error, got ${show(r)}`);
  assert.equal(r.structuredContent?.status, "error", `${label}: ${show(r)}`);
  assert.match(r.content.at(-1).text, re, `${label}: ${show(r)}`);
  // No host internals in the message (SPEC §5).
  assert.doesNotMatch(r.content.at(-1).text, /\.rs:\d|\/home\/|\/work\/|panicked|rquickjs|serde/i, `${label}: leaks internals: ${show(r)}`);
};

test("codemode adversarial: busy loop times out while a later fast execution, /healthz, tools/list and another session all answer", async () => {
  const order = [];
  const slow = execute("while (true) {}").then((r) => (order.push("slow"), r));
  // Give the busy loop a head start so that it is really running.
  await new Promise((r) => setTimeout(r, 300));
  const other = await connectSdk(srv, bearer, { name: "codemode-other" });
  try {
    const [fast, health, list, otherFast] = await Promise.all([
      execute("return 'fast';").then((r) => (order.push("fast"), r)),
      request(`${srv.base}/healthz`, { method: "GET" }).then((r) => (order.push("healthz"), r)),
      client.listTools().then((r) => (order.push("tools/list"), r)),
      execute("return 'other';", other.client).then((r) => (order.push("other"), r)),
    ]);
    assert.deepEqual(fast.content, [{ type: "text", text: "fast" }]);
    assert.equal(health.status, 200);
    assert.ok(list.tools.some((t) => t.name === "execute"));
    assert.deepEqual(otherFast.content, [{ type: "text", text: "other" }]);
    const s = await slow;
    assert.deepEqual(s, {
      content: [{ type: "text", text: TIMED_OUT }],
      structuredContent: { status: "error", error: TIMED_OUT.slice("Error: ".length), logs: [] },
      isError: true,
    });
    assert.equal(order.at(-1), "slow", `completion order ${order.join(", ")}`);
  } finally {
    await other.client.close().catch(() => {});
  }
  await stillHealthy("after the busy loop");
});

test("codemode adversarial: logs written before a timeout are kept", async () => {
  const r = await execute("console.log('before'); while (true) {}");
  assert.deepEqual(r, {
    content: [{ type: "text", text: `${TIMED_OUT}\n\nLogs:\n[log] before` }],
    structuredContent: { status: "error", error: TIMED_OUT.slice("Error: ".length), logs: ["[log] before"] },
    isError: true,
  });
  await stillHealthy("after a timeout with logs");
});

test("codemode adversarial: a long timer is bounded by the execution deadline", async () => {
  const r = await execute("await new Promise((r) => setTimeout(r, 60000)); return 'late';");
  assertError(r, new RegExp(`^${TIMED_OUT}$`), "long timer");
  await stillHealthy("after a long timer");
});

test("codemode adversarial: a self-rescheduling timer storm times out", async () => {
  const r = await execute("function f() { setTimeout(f, 0); } f(); await new Promise(() => {});");
  assertError(r, new RegExp(`^${TIMED_OUT}$`), "timer storm");
  await stillHealthy("after a timer storm");
});

test("codemode adversarial: allocation bomb ends with out of memory", async () => {
  const r = await execute("const a = []; while (true) a.push('x'.repeat(1e5));");
  assertError(r, /^Error: out of memory/, "allocation bomb");
  await stillHealthy("after an allocation bomb");
});

test("codemode adversarial: one huge array allocation ends with out of memory", async () => {
  const r = await execute("return new Array(1e9).fill(0).length;");
  assertError(r, /^Error: out of memory/, "huge array");
  await stillHealthy("after a huge array");
});

test("codemode adversarial: string doubling ends with a descriptive error", async () => {
  const r = await execute("let s = 'x'; while (true) s += s;");
  assertError(r, /out of memory|string too long/i, "string doubling");
  await stillHealthy("after string doubling");
});

test("codemode adversarial: runaway recursion ends with a stack error", async () => {
  for (const code of ["const f = (n) => f(n + 1) + 1; return f(0);", "function g() { return g(); } g();", "const o = {}; o.toJSON = () => [o]; return o;"]) {
    const r = await execute(code);
    assertError(r, /stack|too much recursion|recursion/i, `recursion: ${code}`);
  }
  await stillHealthy("after runaway recursion");
});

test("codemode adversarial: catastrophic regex on a long non-matching string times out", async () => {
  const r = await execute("return /^(a+)+$/.test('a'.repeat(40) + 'b');");
  assertError(r, new RegExp(`^${TIMED_OUT}$`), "catastrophic regex");
  await stillHealthy("after a catastrophic regex");
});

test("codemode adversarial: a million-element sort", async () => {
  const r = await execute(
    "const a = Array.from({length: 1e6}, (_, i) => (i * 7919) % 1000003); a.sort((x, y) => x - y);" +
      " let sorted = true; for (let i = 1; i < a.length; i++) if (a[i - 1] >= a[i]) { sorted = false; break; }" +
      " return [a.length, a[0], a[a.length - 1], sorted];",
  );
  // About a second of compute on an idle machine: it completes, or (on a
  // starved one) hits the configured limit cleanly. Never anything else.
  if (r.isError) assert.equal(r.content[0].text, TIMED_OUT, show(r));
  else assert.deepEqual(r.structuredContent, { status: "completed", result: [1000000, 0, 1000002, true], logs: [] });
  const typed = await execute("const a = Float64Array.from({length: 1e6}, (_, i) => (i * 7919) % 1000003); a.sort(); return [a.length, a[0], a[999999]];");
  assert.deepEqual(typed.structuredContent, { status: "completed", result: [1000000, 0, 1000002], logs: [] }, show(typed));
  await stillHealthy("after a million-element sort");
});

test("codemode adversarial: concurrent executions are isolated from each other", async () => {
  const n = 8;
  const rs = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      execute(`globalThis.mine = ${i}; await new Promise((r) => setTimeout(r, ${20 + ((i * 37) % 50)})); console.log('run', mine); return mine;`),
    ),
  );
  rs.forEach((r, i) =>
    assert.deepEqual(r.structuredContent, { status: "completed", result: i, logs: [`[log] run ${i}`] }, `execution ${i}: ${show(r)}`),
  );
  await stillHealthy("after concurrent executions");
});

test("codemode adversarial: the server never panicked", () => {
  assert.doesNotMatch(srv.log, /panicked at/, srv.logTail(40));
});
