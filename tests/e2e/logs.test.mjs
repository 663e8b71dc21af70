// SPEC §11 structured logs: the server's log carries no colour codes when
// it is not a terminal (the harness reads stderr through a pipe), and
// `--log-format json` (or EXECUTOR_LOG_FORMAT=json) writes one JSON object
// per line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { BIN, startServer, connectSdk, runOk } from "./harness.mjs";

/** Starts a server, runs a session against it, stops it; returns its whole log. */
const logOf = async (options) => {
  const srv = await startServer(options);
  try {
    const { client } = await connectSdk(srv, srv.mint("logs@example.com"));
    assert.equal(await runOk(client, "return 1;"), 1);
    await client.close();
    await srv.stop();
    return srv.log;
  } finally {
    await srv.cleanup();
  }
};

const lines = (log) => log.split("\n").filter((l) => l.trim() !== "");

test("hardening: the log on a pipe has no ANSI colour codes", async () => {
  // NO_COLOR empty counts as unset: the pipe alone must turn colour off.
  const log = await logOf({ env: { RUST_LOG: "debug", NO_COLOR: "" } });
  assert.match(log, /executor listening/);
  assert.ok(lines(log).length > 5, log);
  assert.ok(!log.includes("\x1b["), `colour codes in a piped log:\n${JSON.stringify(log.slice(0, 2000))}`);
});

for (const [how, options] of [
  ["--log-format json", { args: ["--log-format", "json"] }],
  ["EXECUTOR_LOG_FORMAT=json", { env: { EXECUTOR_LOG_FORMAT: "json" } }],
]) {
  test(`hardening: ${how} writes one JSON object per line`, async () => {
    const log = await logOf({ ...options, env: { RUST_LOG: "debug", ...options.env } });
    const all = lines(log);
    assert.ok(all.length > 5, log);
    for (const line of all) {
      let entry;
      assert.doesNotThrow(() => (entry = JSON.parse(line)), `not JSON: ${line}`);
      assert.equal(typeof entry, "object", line);
      assert.ok(entry && !Array.isArray(entry), line);
      assert.equal(typeof entry.level, "string", line);
      assert.equal(typeof entry.timestamp, "string", line);
    }
    assert.ok(
      all.some((l) => JSON.parse(l).fields?.message?.startsWith("executor listening")),
      "the start line is there",
    );
    assert.ok(!log.includes("\x1b["), "no colour codes");
  });
}

test("hardening: an unknown log format is refused", () => {
  assert.throws(
    () => execFileSync(BIN, ["serve", "--log-format", "xml"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 10_000 }),
    (e) => e.status === 2 && /invalid value 'xml' for '--log-format/.test(e.stderr),
  );
});
