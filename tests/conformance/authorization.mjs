// The official conformance suite's authorization-server scenarios against
// the server's built-in authorization server (SPEC §4), with a real browser
// for the person's part. Run by ./run (the bundled Node 22) against the
// server it started:
//
//   node authorization.mjs --bin EXECUTOR_BIN --data-dir DIR --issuer http://127.0.0.1:PORT \
//        --email EMAIL --suite .../conformance-next/dist/index.js --work DIR
//
// The suite is @modelcontextprotocol/conformance 0.2.0-alpha.12 (npm alias
// conformance-next; 0.1.16, which runs the other scenarios, has no
// `authorization` command). Its two scenarios run in one process, the
// second using what the first read:
//   authorization-server-metadata-endpoint  the RFC 8414 document at the
//       issuer's well-known URL (the issuer must be exactly --url);
//   authorization-code-grant  it prints an /authorize URL for a person to
//       open, listens on http://127.0.0.1:PORT/callback for the answer
//       (up to 5 minutes), then redeems the code with PKCE at /token.
// The client it needs is pre-registered here with `executor oauth clients
// add` (a public one: the suite then authenticates with `none`). The
// person is chromium (tests/e2e/browser.mjs): it signs in with a one-time
// login link, checks the consent page names the client and 127.0.0.1, and
// allows; the browser is sent to the suite's listener.
//
// Every check of every scenario is printed with its status. Exits 0 only
// when the suite exited 0, no check is a FAILURE, WARNING or SKIPPED (the
// suite's own exit code counts FAILUREs only, and a scenario that could not
// run is SKIPPED), and both scenarios' main checks are there and SUCCESS.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import net from "node:net";
import readline from "node:readline";
import { parseArgs } from "node:util";
import { launchBrowser, signIn, approve } from "../e2e/browser.mjs";

const { values: opt } = parseArgs({
  options: {
    bin: { type: "string" },
    "data-dir": { type: "string" },
    issuer: { type: "string" },
    email: { type: "string" },
    suite: { type: "string" },
    work: { type: "string" },
  },
  strict: true,
});
for (const k of ["bin", "data-dir", "issuer", "email", "suite", "work"]) {
  if (!opt[k]) {
    console.error(`authorization: --${k} is required`);
    process.exit(2);
  }
}

const CLIENT_NAME = "MCP conformance suite";
// The checks that must be there, and SUCCESS: one per scenario.
const REQUIRED = ["authorization-server-metadata", "authorization-code-grant"];
// How long the suite may take to print the URL, and to finish once the
// browser has answered it (it waits 5 minutes for the callback itself).
const URL_MS = 60_000;
const FINISH_MS = 60_000;

const log = (line) => console.log(`authorization: ${line}`);
const cli = (args) =>
  execFileSync(opt.bin, [...args, "--data-dir", opt["data-dir"]], { encoding: "utf8", timeout: 30_000, stdio: ["ignore", "pipe", "pipe"] });

const freePort = () =>
  new Promise((res, rej) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on("error", rej);
  });

/** Resolves like `promise`, or rejects with `what` after `ms`. */
const within = (promise, ms, what) => {
  let timer;
  const late = new Promise((_, rej) => (timer = setTimeout(() => rej(new Error(`${what} within ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
};

const issuer = opt.issuer;
const callbackPort = await freePort();
const redirectUri = `http://127.0.0.1:${callbackPort}/callback`;
const added = cli(["oauth", "clients", "add", "--name", CLIENT_NAME, "--redirect-uri", redirectUri]);
const clientId = added.match(/^client_id\t(\S+)$/m)?.[1];
if (!clientId || /client_secret/.test(added)) {
  console.error(`authorization: oauth clients add printed ${JSON.stringify(added)}`);
  process.exit(1);
}
const suiteVersion = JSON.parse(readFileSync(join(opt.suite, "..", "..", "package.json"), "utf8")).version;
log(`suite ${suiteVersion}, issuer ${issuer}, public client ${clientId}, redirect URI ${redirectUri}`);

const outDir = join(opt.work, "authorization-results");
mkdirSync(outDir, { recursive: true });
let browserSession;
const suite = spawn(
  process.execPath,
  [opt.suite, "authorization", "--url", issuer, "--client-id", clientId, "--resource", `${issuer}/mcp`, "--port", String(callbackPort), "--output-dir", outDir],
  { stdio: ["ignore", "pipe", "pipe"] },
);
// Killed from outside (./run's timeout): the suite's listener and the
// browser go too.
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    suite.kill("SIGKILL");
    browserSession?.close().finally(() => process.exit(130));
    if (!browserSession) process.exit(130);
  });
}
const output = [];
const exited = new Promise((r) => suite.once("exit", (code, signal) => r(code ?? signal)));
suite.stderr.on("data", (d) => output.push(...d.toString().split("\n").filter(Boolean).map((l) => `stderr: ${l}`)));

// The URL follows its announcement line; the callback listener says when
// it listens. Both must be seen before the browser allows, or its
// redirect could find no listener.
let urlSeen, listeningSeen;
const authorizeUrl = new Promise((r) => (urlSeen = r));
const listening = new Promise((r) => (listeningSeen = r));
let announced = false;
readline.createInterface({ input: suite.stdout }).on("line", (line) => {
  output.push(line);
  if (announced && line.trim()) {
    announced = false;
    urlSeen(line.trim());
  }
  if (/Access the following URL in your browser/.test(line)) announced = true;
  if (line.includes(`Callback server started: http://127.0.0.1:${callbackPort}`)) listeningSeen();
});

const problems = [];
let answered = false;
try {
  const ready = Promise.all([authorizeUrl, listening]).then(([url]) => url);
  const first = await within(Promise.race([ready, exited.then((code) => ({ exited: code }))]), URL_MS, "the suite printed no authorization URL");
  if (typeof first === "string") {
    const url = new URL(first);
    if (`${url.origin}${url.pathname}` !== `${issuer}/authorize`) problems.push(`the suite asked for ${url.origin}${url.pathname}, not ${issuer}/authorize`);
    browserSession = await launchBrowser();
    await signIn(browserSession.page, cli(["console", "login-link", "--email", opt.email, "--public-url", issuer]).trim());
    const back = await approve(browserSession.page, first, { clientName: CLIENT_NAME, redirectHost: "127.0.0.1" });
    log(`the browser was sent to ${back.url.replace(/code=[^&]+/, "code=…")} (answered ${back.status})`);
    answered = true;
    if (back.status !== 200) problems.push(`the suite's listener answered ${back.status}`);
  } else {
    problems.push(`the suite exited (${first.exited}) before printing an authorization URL`);
  }
} catch (e) {
  problems.push(e.stack ?? String(e));
} finally {
  await browserSession?.close();
}

// Without the browser's answer the suite would wait 5 minutes for it.
if (!answered) suite.kill("SIGTERM");
let code;
try {
  code = await within(exited, FINISH_MS, "the suite did not exit");
} catch (e) {
  problems.push(e.message);
  suite.kill("SIGKILL");
  code = await exited;
}
if (code !== 0) problems.push(`the suite exited with ${code}${code === "SIGTERM" ? " (stopped here)" : ""}`);

// Every checks.json: authorization-server-<scenario>-<time>/checks.json,
// in the order the scenarios ran.
const checks = [];
const runs = (existsSync(outDir) ? readdirSync(outDir) : [])
  .map((dir) => ({ dir, m: /^authorization-server-(.+)-(\d{4}-\d\d-\d\dT[\d-]+Z)$/.exec(dir) }))
  .filter(({ dir, m }) => m && existsSync(join(outDir, dir, "checks.json")))
  .sort((a, b) => a.m[2].localeCompare(b.m[2]));
for (const { dir, m } of runs) {
  for (const c of JSON.parse(readFileSync(join(outDir, dir, "checks.json"), "utf8"))) checks.push({ scenario: m[1], ...c });
}
for (const c of checks) {
  const why = c.status === "SUCCESS" ? "" : ` — ${c.errorMessage ?? c.description}`;
  console.log(`  ${c.scenario}: ${c.id} ${c.status}${why}`);
  if (c.status !== "SUCCESS") problems.push(`${c.id} is ${c.status}`);
}
for (const id of REQUIRED) {
  if (!checks.some((c) => c.id === id && c.status === "SUCCESS")) problems.push(`no SUCCESS check ${id}`);
}

if (problems.length) {
  console.log("  the suite's output:");
  for (const line of output) console.log(`    ${line}`);
  for (const p of [...new Set(problems)]) log(`problem: ${p}`);
  process.exit(1);
}
log(`${checks.length} checks, all SUCCESS`);
