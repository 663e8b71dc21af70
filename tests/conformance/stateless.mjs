// The 2026-07-28 server scenarios of the official suite (0.2.0-alpha.12,
// `--spec-version 2026-07-28`) against a running Executor, judged check by
// check: every check must be SUCCESS, except the ones left out below, each
// with the reason it does not apply to a gateway that serves no prompts, no
// resources and none of the suite's diagnostic tools. A check that is left
// out and passes anyway is fine; an expected check that is missing fails,
// so a suite that stops testing something is noticed.
//
// Usage: node stateless.mjs --suite CLI --url URL --work DIR
// Prints one line per scenario and exits non-zero on any failure.

import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { checksUnder } from "./checks.mjs";

const arg = (name) => {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) throw new Error(`stateless.mjs: missing --${name}`);
  return process.argv[i + 1];
};
const suite = arg("suite");
const url = arg("url");
const work = arg("work");

const FIXTURE = (tool) => `needs the suite's diagnostic tool ${tool}, which a gateway does not serve`;
const NO_PROMPTS = "the server offers no prompts or resources: server/discover declares none and the methods answer 404, -32601";

// scenario → { expected: checks that must pass, leftOut: { check: reason } }
const SCENARIOS = {
  "server-stateless": {
    expected: [
      "sep-2575-request-meta-invalid-missing-meta",
      "sep-2575-request-meta-invalid-missing-protocol-version",
      "sep-2575-request-meta-invalid-missing-client-capabilities",
      "sep-2575-http-server-meta-invalid-400",
      "sep-2575-request-meta-client-info-optional",
      "sep-2575-server-implements-discover",
      "sep-2575-server-identifies-in-result-meta",
      "sep-2575-server-declares-prompts-in-discover",
      "sep-2575-discover-capabilities-match-handlers",
      "sep-2575-http-server-error-jsonrpc-id",
      "sep-2575-server-unsupported-version-error",
      "sep-2575-http-server-unsupported-version-400",
      "sep-2575-http-server-header-mismatch-400",
      "sep-2575-http-server-method-not-found-404-initialize",
      "sep-2575-http-server-method-not-found-404-ping",
      "sep-2575-http-server-method-not-found-404-logging-setlevel",
      "sep-2575-http-server-method-not-found-404-resources-subscribe",
      "sep-2575-http-server-method-not-found-404-resources-unsubscribe",
      "sep-2575-http-server-method-not-found-404",
      "sep-2575-server-sends-subscription-ack",
      "sep-2575-server-tags-subscription-id",
      "sep-2575-server-honors-notification-filter",
    ],
    leftOut: {
      "sep-2575-server-rejects-undeclared-capability": FIXTURE("test_missing_capability"),
      "sep-2575-missing-capability-http-400": FIXTURE("test_missing_capability"),
      "sep-2575-http-server-no-independent-requests-on-stream": FIXTURE("test_streaming_elicitation"),
      "sep-2575-server-no-log-without-loglevel": FIXTURE("test_logging_tool"),
      "sep-2575-server-sends-tools-list-changed-on-subscription":
        `${FIXTURE("test_trigger_tool_change")}; tests/e2e/sessionless.test.mjs sees it when the CLI adds an integration`,
      "sep-2575-server-sends-prompts-list-changed-on-subscription": NO_PROMPTS,
    },
  },
  "tools-list": {
    expected: ["tools-list", "tools-name-format", "tools-list-deterministic-order", "wire-schema-valid"],
    leftOut: {},
  },
  caching: {
    expected: ["sep-2549-tools-list-caching-hints", "sep-2549-ttl-non-negative", "sep-2549-cache-scope-valid", "wire-schema-valid"],
    leftOut: {
      "sep-2549-prompts-list-caching-hints": NO_PROMPTS,
      "sep-2549-resources-list-caching-hints": NO_PROMPTS,
      "sep-2549-resources-templates-list-caching-hints": NO_PROMPTS,
      "sep-2549-resources-read-caching-hints": NO_PROMPTS,
    },
  },
  "dns-rebinding-protection": {
    expected: ["localhost-host-rebinding-rejected", "localhost-host-valid-accepted"],
    leftOut: {},
  },
};

let failed = 0;
for (const [scenario, { expected, leftOut }] of Object.entries(SCENARIOS)) {
  const out = join(work, `stateless-${scenario}`);
  mkdirSync(out, { recursive: true });
  const run = spawnSync(process.execPath, [suite, "server", "--url", url, "--scenario", scenario, "--spec-version", "2026-07-28", "-o", out], {
    encoding: "utf8",
    timeout: 90_000,
  });
  const checks = checksUnder(out);
  const problems = [];
  if (checks.length === 0) problems.push(`the suite recorded no check (exit ${run.status}): ${(run.stdout + run.stderr).slice(-1500)}`);
  // A check may be recorded more than once (one per probe): each must pass.
  for (const c of checks) {
    if (c.status === "SUCCESS" || c.status === "INFO" || c.id in leftOut) continue;
    problems.push(`${c.id}: ${c.status} ${c.errorMessage ?? ""}`);
  }
  const seen = new Set(checks.map((c) => c.id));
  for (const id of expected) if (!seen.has(id)) problems.push(`${id}: not run by the suite`);
  const passing = checks.filter((c) => c.status === "SUCCESS").length;
  if (problems.length === 0) {
    console.log(`PASS 2026-07-28 ${scenario} (${passing} checks passed, ${Object.keys(leftOut).length} left out)`);
  } else {
    failed++;
    console.log(`FAIL 2026-07-28 ${scenario}`);
    for (const p of problems) console.log(`    ${p}`);
  }
  for (const [id, why] of Object.entries(leftOut)) {
    const status = checks.find((c) => c.id === id)?.status ?? "not run";
    console.log(`    left out ${id} (${status}): ${why}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
