// SPEC §11 start checks through the real binary: `executor serve` refuses a
// store it cannot safely use — a file that is not a database, a schema from
// a newer release, sealed secrets whose key is gone — exits non-zero, and
// says which path and why; a fresh store comes out private (0700 / 0600).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync, statSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, freePort } from "./harness.mjs";

const serve = async (dataDir, env = {}) =>
  spawnSync(BIN, ["serve", "--listen", `127.0.0.1:${await freePort()}`, "--data-dir", dataDir], {
    encoding: "utf8",
    timeout: 15_000,
    // No key from the environment: the key file is what is tested.
    env: Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([k]) => k !== "EXECUTOR_SECRET_KEY")),
  });

const withDir = async (f) => {
  const dir = mkdtempSync(join(tmpdir(), "executor-start-"));
  try {
    await f(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

test("start: a file that is not a database is refused, naming the path", () =>
  withDir(async (dir) => {
    const db = join(dir, "executor.db");
    writeFileSync(db, "this is not a database, it is a note\n".repeat(20));
    const run = await serve(dir);
    assert.notEqual(run.status, 0, "serve must not start");
    assert.ok(run.stderr.includes(db), run.stderr);
    assert.match(run.stderr, /is not a SQLite database/);
  }));

test("start: a store from a newer release is refused, naming both versions", () =>
  withDir(async (dir) => {
    execFileSync(BIN, ["token", "create", "--email", "v@example.com", "--data-dir", dir], { encoding: "utf8" });
    const db = join(dir, "executor.db");
    execFileSync("python3", ["-c", `import sqlite3; c = sqlite3.connect(${JSON.stringify(db)}); c.execute("PRAGMA user_version = 999"); c.commit()`]);
    const run = await serve(dir);
    assert.notEqual(run.status, 0);
    assert.ok(run.stderr.includes(db), run.stderr);
    assert.match(run.stderr, /schema version 999; this executor knows up to \d+/);
  }));

test("start: sealed secrets without their key are refused with how to restore it", () =>
  withDir(async (dir) => {
    const cli = (argv, input) =>
      execFileSync(BIN, [...argv, "--data-dir", dir], { encoding: "utf8", input, stdio: ["pipe", "pipe", "pipe"] });
    cli(["token", "create", "--email", "k@example.com"]);
    const spec = join(dir, "s.json");
    writeFileSync(spec, JSON.stringify({ openapi: "3.0.3", info: { title: "s", version: "1" }, paths: { "/a": { get: { operationId: "a", responses: { 200: { description: "ok" } } } } } }));
    cli(["integrations", "add", "openapi", "--spec", spec, "--namespace", "s", "--base-url", "https://example.com"]);
    cli(["connections", "set", "s", "--api-key", "-"], "SECRET-1234\n");
    unlinkSync(join(dir, "secret.key"));
    const run = await serve(dir);
    assert.notEqual(run.status, 0);
    assert.ok(run.stderr.includes(join(dir, "secret.key")), run.stderr);
    assert.match(run.stderr, /Put the original secret.key back/);
    assert.ok(!run.stderr.includes("SECRET-1234"));
  }));

test("start: a fresh data dir and store are private", () =>
  withDir(async (parent) => {
    const dir = join(parent, "data");
    execFileSync(BIN, ["token", "create", "--email", "p@example.com", "--data-dir", dir], { encoding: "utf8" });
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(join(dir, "executor.db")).mode & 0o777, 0o600);
  }));
