// A disk that fills up (issue 41 §4): the server on a data dir on a small
// tmpfs the test mounts, the disk then filled to the last byte by another
// writer. Requests that need a write get a clear error that names the
// cause (a 503 with Retry-After where the status is not sent yet), nothing
// written before is lost, and once space returns the server serves again by
// itself, with no restart. SQLite only: on Postgres the disk is the
// database server's (its `disk_full` maps to the same errors).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, openSync, writeSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { STORE, startServer, initSession, post, rpc, responseTo, EXECUTE_ONE, sleep } from "./harness.mjs";

const skip = STORE === "postgres" && "the data dir holds no database on Postgres (the disk is the database server's)";

/** Writes to `file` until the file system has no byte left. */
const fillUp = (file) => {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(1 << 16, 7);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if (e.code !== "ENOSPC") throw e;
  } finally {
    closeSync(fd);
  }
  // The last partial chunk: byte by byte, so not one is left.
  const tail = openSync(file, "a");
  try {
    for (;;) writeSync(tail, Buffer.alloc(1, 7));
  } catch (e) {
    if (e.code !== "ENOSPC") throw e;
  } finally {
    closeSync(tail);
  }
};

test("a full disk: clear errors, nothing written lost, served again once space returns", { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "executor-full-"));
  // A small file system of its own (the test runs as root, as CI does).
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=24m", "tmpfs", dir]);
  let srv;
  try {
    srv = await startServer({ dataDir: dir, store: "sqlite" });
    const org = "full@example.com";
    const bearer = srv.mint(org);
    const s = await initSession(srv, bearer);
    const headers = { bearer, sessionId: s.sessionId, protocolVersion: s.protocolVersion };
    for (let i = 0; i < 5; i++) {
      const res = await post(srv, rpc("tools/call", EXECUTE_ONE, i), headers);
      assert.equal(responseTo(res, i)?.result?.content?.[0]?.text, "1", res.body);
    }
    const listed = () =>
      srv
        .cli(["executions", "list", "--data-dir", dir, "--org", org])
        .split("\n")
        .filter((line) => line.includes("return 1"));
    const before = listed();
    assert.equal(before.length, 5, before.join("\n"));

    const filler = join(dir, "filler");
    fillUp(filler);
    // An execution runs, but its record cannot be kept: the agent is told
    // why, in words, not with an internal error id.
    const ran = await post(srv, rpc("tools/call", EXECUTE_ONE, 10), headers);
    assert.equal(ran.status, 200, ran.body);
    const text = responseTo(ran, 10)?.result?.content?.[0]?.text ?? "";
    assert.match(text, /storage is full/, ran.body);
    assert.doesNotMatch(text, /Internal tool error/, ran.body);
    // A new session cannot be written: 503 with Retry-After, and why.
    const init = await post(srv, rpc("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "full", version: "1" } }, 11), { bearer });
    assert.equal(init.status, 503, init.body);
    assert.equal(init.headers["retry-after"], "1");
    assert.match(init.body, /storage is full/);
    // The session in hand still answers what needs no write.
    const list = await post(srv, rpc("tools/list", {}, 12), headers);
    assert.equal(list.status, 200, list.body);
    assert.ok(responseTo(list, 12)?.result?.tools?.length > 0, list.body);

    // Space returns: the server serves again, by itself.
    rmSync(filler);
    await sleep(500);
    for (let i = 0; i < 3; i++) {
      const res = await post(srv, rpc("tools/call", EXECUTE_ONE, 20 + i), headers);
      assert.equal(responseTo(res, 20 + i)?.result?.content?.[0]?.text, "1", res.body);
    }
    const again = await initSession(srv, bearer);
    assert.ok(again.sessionId);
    // Nothing written before the disk filled was lost.
    const after = listed();
    for (const line of before) assert.ok(after.includes(line), `${line} is gone`);
    assert.equal(after.length, 8, after.join("\n"));
    assert.ok(srv.child.exitCode === null, "the server never stopped");
  } finally {
    await srv?.stop();
    execFileSync("umount", [dir]);
    rmSync(dir, { recursive: true, force: true });
  }
});
