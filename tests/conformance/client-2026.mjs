// The client scenarios of the official suite's 2026-07-28 requirement set
// (0.2.0-alpha.12, `list --client --requirements 2026-07-28`), run at that
// version's wire with our binary as the client (./upstream-client: add the
// suite's server as an MCP integration, `connections login` for auth/*, a
// call). Judged check by check: every check must be SUCCESS (or INFO),
// except the ones left out below, each with the reason it cannot apply to
// a gateway; a WARNING or a SKIPPED fails like a FAILURE, since the suite's
// own exit code lets both through. A scenario that records no check fails.
//
// Usage: node client-2026.mjs --suite CLI --command UPSTREAM_CLIENT --work DIR
//        [--scenarios "a b c"] [--attempts N]
// Prints one line per scenario and exits non-zero on any failure. A
// scenario whose only problems are WARNINGs is run again, up to --attempts
// times (some auth checks read timings off a loaded 2-core machine).

import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { checksUnder } from "./checks.mjs";

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) {
    if (fallback !== undefined) return fallback;
    throw new Error(`client-2026.mjs: missing --${name}`);
  }
  return process.argv[i + 1];
};
const suite = arg("suite");
const command = arg("command");
const work = arg("work");
const attempts = Number(arg("attempts", "3"));

const ONLY_TOOLS =
  "SPEC §8 proxies an upstream's tools only (not its resources or prompts), so the client never sends this method";
const NO_HANDSHAKE =
  "at 2026-07-28 the client starts with server/discover and sends no initialize handshake (the 0.1.16 `initialize` scenario covers the older versions)";
const NO_CAPABILITY = (what) =>
  `the client declares no ${what} capability (only form elicitation, answered through the approval path): the check applies only when it is declared`;

// The required client scenarios of 2026-07-28, with the checks left out
// (by check id and name) and why.
const SCENARIOS = {
  tools_call: {},
  "request-metadata": {
    "sep-2575-client-declares-roots-capability ClientDeclaresRootsCapability": NO_CAPABILITY("roots"),
    "sep-2575-client-declares-sampling-capability ClientDeclaresSamplingCapability": NO_CAPABILITY("sampling"),
  },
  "auth/metadata-default": {},
  "auth/metadata-var1": {},
  "auth/metadata-var2": {},
  "auth/metadata-var3": {},
  "auth/basic-cimd": {},
  "auth/scope-from-www-authenticate": {},
  "auth/scope-from-scopes-supported": {},
  "auth/scope-omitted-when-undefined": {},
  "auth/scope-step-up": {},
  "auth/scope-retry-limit": {},
  "auth/token-endpoint-auth-basic": {},
  "auth/token-endpoint-auth-post": {},
  "auth/token-endpoint-auth-none": {},
  "auth/pre-registration": {},
  "auth/resource-mismatch": {},
  "auth/offline-access-scope": {},
  "auth/offline-access-not-supported": {},
  "auth/authorization-server-migration": {},
  "auth/iss-supported": {},
  "auth/iss-not-advertised": {},
  "auth/iss-supported-missing": {},
  "auth/iss-wrong-issuer": {},
  "auth/iss-unexpected": {},
  "auth/iss-normalized": {},
  "auth/metadata-issuer-mismatch": {},
  "sep-2322-client-request-state": {},
  "http-standard-headers": {
    "sep-2243-client-includes-standard-headers ClientMcpMethodHeader_initialize": NO_HANDSHAKE,
    "sep-2243-client-includes-standard-headers ClientMcpMethodHeader_notifications_initialized": NO_HANDSHAKE,
    "sep-2243-client-includes-standard-headers ClientMcpMethodHeader_resources_list": ONLY_TOOLS,
    "sep-2243-client-includes-standard-headers ClientMcpMethodHeader_resources_read": ONLY_TOOLS,
    "sep-2243-client-includes-standard-headers ClientMcpMethodHeader_prompts_list": ONLY_TOOLS,
    "sep-2243-client-includes-standard-headers ClientMcpMethodHeader_prompts_get": ONLY_TOOLS,
    "sep-2243-client-includes-standard-headers ClientMcpNameHeader_resources_read": ONLY_TOOLS,
    "sep-2243-client-includes-standard-headers ClientMcpNameHeader_prompts_get": ONLY_TOOLS,
  },
  "http-custom-headers": {},
  "http-invalid-tool-headers": {},
  "json-schema-ref-no-deref": {},
};

const only = arg("scenarios", "").split(/\s+/).filter(Boolean);
for (const name of only) {
  if (!(name in SCENARIOS)) throw new Error(`client-2026.mjs: ${name} is not a 2026-07-28 client scenario here`);
}

const judge = (checks, leftOut, run) => {
  const problems = [];
  if (checks.length === 0) {
    problems.push({ warning: false, text: `the suite recorded no check (exit ${run.status}): ${(run.stdout + run.stderr).slice(-1500)}` });
  }
  for (const c of checks) {
    if (c.status === "SUCCESS" || c.status === "INFO" || `${c.id} ${c.name}` in leftOut) continue;
    problems.push({ warning: c.status === "WARNING", text: `${c.id} ${c.name}: ${c.status} ${c.errorMessage ?? c.description ?? ""}` });
  }
  // The suite prints this when the client command itself failed.
  if (/CLIENT EXITED WITH ERROR/.test(run.stdout) && !problems.length) {
    problems.push({ warning: false, text: `the client command failed:\n${run.stdout.slice(-2000)}` });
  }
  return problems;
};

let failed = 0;
for (const [scenario, leftOut] of Object.entries(SCENARIOS)) {
  if (only.length && !only.includes(scenario)) continue;
  const out = join(work, `client-2026-${scenario.replaceAll("/", "_")}`);
  let problems = [];
  let checks = [];
  for (let attempt = 1; attempt <= attempts; attempt++) {
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    const run = spawnSync(
      process.execPath,
      [suite, "client", "--command", command, "--scenario", scenario, "--spec-version", "2026-07-28", "-o", out],
      { encoding: "utf8", timeout: 120_000 },
    );
    checks = checksUnder(out);
    problems = judge(checks, leftOut, run);
    if (!problems.length || problems.some((p) => !p.warning) || attempt === attempts) break;
    console.log(`RETRY 2026-07-28 client ${scenario} (attempt ${attempt} ended with warnings only:)`);
    for (const p of problems) console.log(`    ${p.text}`);
  }
  const passing = checks.filter((c) => c.status === "SUCCESS").length;
  if (!problems.length) {
    console.log(`PASS 2026-07-28 client ${scenario} (${passing} checks passed, ${Object.keys(leftOut).length} left out)`);
  } else {
    failed++;
    console.log(`FAIL 2026-07-28 client ${scenario}`);
    for (const p of problems) console.log(`    ${p.text}`);
  }
  for (const [key, why] of Object.entries(leftOut)) {
    const status = checks.find((c) => `${c.id} ${c.name}` === key)?.status ?? "not run";
    console.log(`    left out ${key} (${status}): ${why}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
