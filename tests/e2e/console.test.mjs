// SPEC §14's console, end to end in a real browser (Debian's chromium,
// driven by playwright-core) against the real binary: a person signs in
// with a one-time link, adds an OpenAPI integration from an uploaded file
// (after its preview), sets its credential, adds a policy that asks for
// approval; an agent's `execute` over MCP (the official TypeScript SDK)
// pauses, appears in the open Approvals page without a reload, is
// approved with the keyboard alone; the run and its tool call show in
// Executions and Activity; revoking the agent's token in Clients stops it.
// Every page is checked for CSP violations and console errors, with
// axe-core for accessibility (no serious or critical violation), and for
// escaping: hostile text from the API description and the agent renders
// as text. Screenshots of each page at desktop and phone widths are saved
// under tests/e2e/results/console/ for a person to look at.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawn } from "node:child_process";
import { startServer, connectSdk, freePort, waitUntil } from "./harness.mjs";
import { launchBrowser, signIn } from "./browser.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const OWN_UPSTREAM = join(here, "fixtures", "mcp-upstream.mjs");
const SHOTS = join(here, "results", "console");
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const EMAIL = "console-owner@example.com";
const SECRET = "sekrit-bearer-4242";
// What an API description or an agent might carry to break a page.
const HOSTILE = `<script>alert(1)</script> "><img src=x onerror=alert(2)> javascript:alert(3)`;

let upstream;
let upstreamUrl;
const received = [];
let srv;
let chromium;
let page;
let work;
const problems = []; // console errors, page errors, CSP violations

const document = () => ({
  openapi: "3.0.3",
  info: { title: "Shop", version: "1.0.0", description: HOSTILE },
  servers: [{ url: upstreamUrl }],
  components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
  security: [{ bearer: [] }],
  paths: {
    "/items": {
      get: { operationId: "listItems", summary: `List items ${HOSTILE}`, responses: { 200: { description: "ok" } } },
      post: {
        operationId: "createItem",
        summary: "Create an item",
        requestBody: { content: { "application/json": { schema: { type: "object", properties: { name: { type: "string" } } } } } },
        responses: { 201: { description: "created" } },
      },
    },
  },
});

before(async () => {
  upstream = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      received.push({ method: req.method, url: req.url, authorization: req.headers.authorization, body });
      if (req.headers.authorization !== `Bearer ${SECRET}`) return res.writeHead(401).end("{}");
      res.writeHead(req.method === "POST" ? 201 : 200, { "content-type": "application/json" });
      res.end(JSON.stringify(req.method === "POST" ? { id: 7, ...JSON.parse(body || "{}") } : [{ id: 1, name: HOSTILE }]));
    });
  });
  await new Promise((r) => upstream.listen(0, "127.0.0.1", r));
  upstreamUrl = `http://127.0.0.1:${upstream.address().port}`;
  srv = await startServer({ args: ["--allow-local-network"] });
  work = mkdtempSync(join(tmpdir(), "executor-console-"));
  rmSync(SHOTS, { recursive: true, force: true });
  mkdirSync(SHOTS, { recursive: true });
  chromium = await launchBrowser();
  page = chromium.page;
  page.on("console", (m) => {
    if (m.type() === "error" || /Content Security Policy/i.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  // Any script that runs from hostile text would say so here.
  page.on("dialog", (d) => {
    problems.push(`dialog: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
});

after(async () => {
  await chromium?.close();
  await srv?.cleanup();
  upstream?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

const url = (path) => `${srv.base}${path}`;

/** Checks the page now shown: accessibility, escaping, CSP; and saves its screenshots. */
const inspect = async (name) => {
  assert.equal(await page.locator("img").count(), 0, `${name}: no image element (hostile markup stays text)`);
  assert.equal(await page.locator("main script").count(), 0, `${name}: no script element in the content`);
  const result = await page.evaluate(`${AXE}; axe.run(document, { resultTypes: ["violations"] })`);
  const serious = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(
    serious.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join("; ")})`),
    [],
    `${name}: no serious or critical accessibility violation`,
  );
  for (const [width, height, label] of [[1280, 900, "desktop"], [390, 844, "phone"]]) {
    await page.setViewportSize({ width, height });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${name}: no sideways scrolling at ${label} width (${overflow}px too wide)`);
    await page.screenshot({ path: join(SHOTS, `${name}-${label}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
  assert.deepEqual(problems, [], `${name}: no CSP violation, console error or dialog`);
};

const loginLink = () =>
  srv.cli(["console", "login-link", "--email", EMAIL, "--public-url", srv.base, "--data-dir", srv.dataDir]).trim();

test("console: a person signs in, adds an integration from a file, sets its credential and a policy", async () => {
  const response = await fetch(url("/"), { redirect: "manual" });
  assert.equal(response.status, 303);
  assert.match(response.headers.get("location"), /\/console$/);
  const unsigned = await fetch(url("/console/integrations"), { redirect: "manual" });
  assert.equal(unsigned.status, 303, "not signed in: to sign-in");
  assert.match(unsigned.headers.get("location"), /\/console\/login\?next=%2Fconsole%2Fintegrations/);

  await signIn(page, loginLink());
  await page.goto(url("/console/integrations"));
  const csp = (await page.context().request.get(url("/console/integrations"))).headers()["content-security-policy"];
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline/);
  await inspect("integrations-empty");

  await page.getByRole("link", { name: "Add an integration" }).click();
  await page.waitForURL(/\/console\/integrations\/new$/);
  assert.equal(await page.locator("#add-stdio").count(), 0, "no stdio form on a server that starts no commands");
  await inspect("integrations-new");
  const file = join(work, "shop.json");
  writeFileSync(file, JSON.stringify(document()));
  await page.locator("#openapi-ns").fill("shop");
  await page.locator("#openapi-file").setInputFiles(file);
  await page.locator("section.add").first().getByRole("button", { name: "Preview" }).click();
  await page.waitForLoadState("load");
  assert.equal(await page.locator("h1").innerText(), "Preview");
  assert.match(await page.locator("main").innerText(), /shop\.items\.createItem/);
  assert.match(await page.locator("dl.facts").innerText(), /Authentication\s+bearer token/);
  await inspect("integrations-preview");
  await page.getByRole("button", { name: "Add shop" }).click();
  await page.waitForURL(/\/console\/integrations\/shop$/);
  assert.equal(await page.locator("h1").innerText(), "Integration shop");
  const main = await page.locator("main").innerText();
  assert.ok(main.includes("<script>alert(1)</script>"), "hostile text from the description renders as text");
  await inspect("integration-detail");

  await page.goto(url("/console/integrations"));
  assert.match(await page.locator("table").innerText(), /shop\s+openapi\s+2\s+missing credential/, "it declares a bearer token and has none");
  await page.goto(url("/console/integrations/shop"));
  await page.locator("#cred-kind").selectOption("bearer");
  await page.locator("#cred-value").fill(SECRET);
  await page.getByRole("button", { name: "Save the credential" }).click();
  await page.waitForLoadState("load");
  assert.match(await page.locator("main").innerText(), /The credential is saved/);
  assert.ok(!(await page.content()).includes(SECRET), "the secret is never shown back");
  await page.getByRole("button", { name: "Test the connection" }).click();
  await page.waitForLoadState("load");
  assert.match(await page.locator("main").innerText(), /The connection works/);

  await page.goto(url("/console/integrations"));
  assert.match(await page.locator("table").innerText(), /shop\s+openapi\s+2\s+ready/);

  await page.goto(url("/console/policies"));
  // The pattern is checked as it is typed, with the tools it matches.
  const pattern = page.locator("#new-pattern");
  await pattern.pressSequentially("shop..x");
  await page.locator("#pattern-check .problem").waitFor();
  assert.match(await page.locator("#pattern-check").innerText(), /cannot be saved/);
  await pattern.fill("");
  await pattern.pressSequentially("shop.items.*");
  await page.locator("#pattern-check .check").waitFor();
  const matches = await page.locator("#pattern-check").innerText();
  assert.match(matches, /matches 2 tools/);
  assert.match(matches, /shop\.items\.createItem/);
  assert.match(matches, /shop\.items\.listItems/);
  await inspect("policies-check");
  await pattern.fill("shop.*");
  await page.locator("form.inline").last().getByLabel("Action").selectOption("require_approval");
  await page.getByRole("button", { name: "Add", exact: true }).click();
  await page.waitForURL(/\/console\/policies$/);
  assert.match(await page.locator("table").innerText(), /shop\.\*\s+require_approval/);
  await inspect("policies");
});

test("console: an agent's paused call appears in Approvals without a reload and is approved with the keyboard", async () => {
  const token = srv.mint(EMAIL);
  const { client } = await connectSdk(srv, token);
  try {
    await page.goto(url("/console/approvals"));
    assert.match(await page.locator("#pending").innerText(), /Nothing waits/);
    await page.evaluate(() => (window.__sameDocument = true));
    await inspect("approvals-empty");

    const paused = await client.callTool({
      name: "execute",
      arguments: { code: `return await tools.shop.items.createItem({ body: { name: ${JSON.stringify(HOSTILE)} } });` },
    });
    const executionId = paused.structuredContent?.executionId;
    assert.ok(executionId, JSON.stringify(paused));
    // The open page shows it: the live stream, no navigation.
    await page.locator("#pending .card").waitFor({ timeout: 10_000 });
    assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was not reloaded");
    const card = await page.locator("#pending .card").innerText();
    assert.match(card, /shop\.items\.createItem/);
    assert.ok(card.includes(HOSTILE.slice(0, 20)), "the argument preview shows the agent's text as text");
    await inspect("approvals-pending");

    // Keyboard only: Tab to Approve, then Enter.
    await page.locator("body").focus();
    let focused = "";
    for (let i = 0; i < 60 && focused !== "Approve"; i++) {
      await page.keyboard.press("Tab");
      focused = await page.evaluate(() => document.activeElement?.textContent?.trim() ?? "");
    }
    assert.equal(focused, "Approve", "Approve is reachable with Tab");
    await Promise.all([page.waitForURL(new RegExp(`/console/approvals/${executionId}$`)), page.keyboard.press("Enter")]);
    assert.match(await page.locator("main").innerText(), /no longer waits: its run is completed/);
    await inspect("approval-decided");
    assert.ok(received.some((r) => r.method === "POST" && r.authorization === `Bearer ${SECRET}`), "the upstream got the call");

    // The agent's own resume sees the outcome of the decision made in the console.
    const resumed = await client.callTool({ name: "resume", arguments: { executionId, action: "accept" } });
    assert.equal(resumed.structuredContent?.status, "completed", JSON.stringify(resumed));
    assert.equal(resumed.structuredContent.result.data.id, 7, "the upstream's answer");

    // Executions and Activity show the run and its call.
    await page.goto(url("/console/executions"));
    await inspect("executions");
    await page.getByRole("link", { name: /UTC/ }).first().click();
    await page.waitForURL(new RegExp(`/console/executions/${executionId}$`));
    const detail = await page.locator("main").innerText();
    assert.match(detail, /completed/);
    assert.match(detail, /shop\.items\.createItem/);
    assert.match(detail, /approved by acc_\w+ in the console after/);
    assert.ok(detail.includes("<script>alert(1)</script>"), "the result shows the upstream's text as text");
    await inspect("execution-detail");
    await page.goto(url("/console/activity?tool=shop."));
    assert.match(await page.locator("table").innerText(), /shop\.items\.createItem\s+ok/);
    await inspect("activity");

    // Clients: the agent's token is listed; revoking it stops the agent.
    await page.goto(url("/console/clients"));
    await inspect("clients");
    const tokenId = token.split("_")[1];
    await page.locator(`form[action*="/clients/tokens/"][action*="${tokenId}"] button`).click();
    await page.waitForURL(/\/console\/clients/);
    await waitUntil("the agent loses access", async () => {
      const r = await client.callTool({ name: "execute", arguments: { code: "return 1" } }).then(() => "ok", (e) => String(e));
      return r !== "ok";
    }, { ms: 5000, every: 100 });
  } finally {
    await client.close().catch(() => {});
  }
});

test("console approval mode: the paused text links the console, and the agent's resume waits for the human there", async () => {
  const token = srv.mint(EMAIL);
  const { client } = await connectSdk(srv, token, { query: "?elicitation_mode=console" });
  try {
    const { tools } = await client.listTools();
    const resumeTool = tools.find((t) => t.name === "resume");
    assert.deepEqual(resumeTool.inputSchema.required, ["executionId"], "resume takes no decision here");
    assert.match(resumeTool.description, /does not decide/);

    const code = `
      const first = await tools.shop.items.createItem({ body: { name: "first" } });
      try { await tools.shop.items.createItem({ body: { name: "second" } }); return "second ran"; }
      catch (e) { return "first " + first.data.id + ", second refused: " + e.message; }`;
    const paused = await client.callTool({ name: "execute", arguments: { code } });
    const executionId = paused.structuredContent?.executionId;
    assert.ok(executionId, JSON.stringify(paused));
    const approvalUrl = `${srv.base}/console/approvals/${executionId}`;
    assert.equal(paused.structuredContent.approvalUrl, approvalUrl);
    assert.ok(paused.content[0].text.includes(approvalUrl), "the paused text carries the console URL");
    assert.match(paused.content[0].text, /waits for their decision/);

    // The agent's resume, even one that says accept, decides nothing: it waits.
    let settled = false;
    const waiting = client
      .callTool({ name: "resume", arguments: { executionId, action: "accept" } })
      .finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(settled, false, "resume waits for the console");
    await page.goto(approvalUrl);
    assert.match(await page.locator("main").innerText(), /shop\.items\.createItem/, "still waiting: the agent did not decide");
    await page.getByRole("button", { name: "Approve" }).click();
    await page.waitForLoadState("load");
    const next = await waiting;
    assert.equal(next.structuredContent?.status, "waiting_for_interaction", JSON.stringify(next));
    assert.equal(next.structuredContent.executionId, executionId);
    assert.match(next.structuredContent.interaction.address, /shop\.items\.createItem/);
    assert.ok(next.content[0].text.includes(approvalUrl), "the next pause links the console too");

    // The second pause, declined in the console; resume returns the program's result.
    const finishing = client.callTool({ name: "resume", arguments: { executionId } });
    await page.goto(approvalUrl);
    await page.getByRole("button", { name: "Decline" }).click();
    await page.waitForLoadState("load");
    const done = await finishing;
    assert.equal(done.structuredContent?.status, "completed", JSON.stringify(done));
    assert.match(done.structuredContent.result, /^first 7, second refused: .*declined/);
    // A later resume sees the settled execution.
    const again = await client.callTool({ name: "resume", arguments: { executionId } });
    assert.deepEqual(again.structuredContent, done.structuredContent);

    await page.goto(url(`/console/executions/${executionId}`));
    const detail = await page.locator("main").innerText();
    assert.match(detail, /approved by acc_\w+ in the console after/);
    assert.match(detail, /declined by acc_\w+ in the console after/);
    await inspect("execution-console-mode");
  } finally {
    await client.close().catch(() => {});
  }
});

test("console: an MCP server is probed (transport, auth) before it is added; the stdio form only where commands may start", async () => {
  const other = await startServer({ args: ["--allow-stdio-integrations", "--allow-local-network"] });
  const upstreamPort = await freePort();
  const mcp = spawn(process.execPath, [OWN_UPSTREAM, "http", String(upstreamPort)], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    await new Promise((resolve) => mcp.stdout.on("data", (d) => /listening/.test(String(d)) && resolve()));
    const link = other.cli(["console", "login-link", "--email", EMAIL, "--public-url", other.base, "--data-dir", other.dataDir]).trim();
    await signIn(page, link);
    await page.goto(`${other.base}/console/integrations/new`);
    await page.locator("#mcp-ns").fill("remote");
    await page.locator("#mcp-url").fill(`http://127.0.0.1:${upstreamPort}/mcp`);
    await page.getByRole("button", { name: "Probe" }).click();
    await page.waitForLoadState("load");
    const facts = await page.locator("dl.facts").innerText();
    assert.match(facts, /Transport\s+streamable HTTP/);
    assert.match(facts, /Authentication\s+none declared/);
    assert.match(await page.locator("main").innerText(), /remote\.echo/);
    await inspect("integrations-probe");

    await page.goto(`${other.base}/console/integrations/new`);
    await page.locator("#stdio-ns").fill("local");
    await page.locator("#stdio-command").fill(process.execPath);
    await page.locator("#stdio-args").fill(OWN_UPSTREAM);
    await page.locator("#stdio-env").fill("UPSTREAM_TOKEN=tok-stdio-123");
    await page.locator("#add-stdio").locator("..").getByRole("button", { name: "Add" }).click();
    await page.waitForURL(/\/console\/integrations\/local$/);
    const detail = await page.locator("main").innerText();
    assert.match(detail, /Transport\s+stdio/);
    assert.match(detail, /local\.echo/);
    assert.ok(!(await page.content()).includes("tok-stdio-123"), "the environment is never shown back");
    await inspect("integration-stdio");
  } finally {
    mcp.kill();
    await other.cleanup();
    // Back to the first server's session for the tests after this one.
    await signIn(page, loginLink());
  }
});

test("console: Connect a client and creating a token; pages read without JavaScript", async () => {
  await page.goto(url("/console/connect"));
  assert.match(await page.locator("main").innerText(), new RegExp(`claude mcp add --transport http executor ${srv.base}/mcp`));
  await inspect("connect");
  await page.goto(url("/console/clients"));
  await page.getByRole("button", { name: "Create a token" }).click();
  await page.waitForLoadState("load");
  const shown = await page.getByLabel("The new API token").inputValue();
  assert.match(shown, /^exk_/);
  await page.reload();
  assert.ok(!(await page.content()).includes(shown), "shown once");

  // Without JavaScript every page still reads (server-rendered).
  const cookies = await page.context().cookies(srv.base);
  const cookie = cookies.map((c) => `${c.name}=${c.value}`).join("; ");
  for (const path of ["/console/integrations", "/console/integrations/shop", "/console/policies", "/console/approvals", "/console/executions", "/console/activity", "/console/clients", "/console/connect"]) {
    const res = await fetch(url(path), { headers: { cookie } });
    assert.equal(res.status, 200, path);
    const html = await res.text();
    assert.match(html, /<main id="main">/, path);
    assert.doesNotMatch(html, /<script>alert/, `${path}: nothing hostile unescaped`);
  }
});

test("console: an unsafe request without the session's CSRF token or from another origin is refused", async () => {
  const cookies = await page.context().cookies(srv.base);
  const cookie = cookies.map((c) => `${c.name}=${c.value}`).join("; ");
  const post = (headers, body) =>
    fetch(url("/console/policies"), { method: "POST", redirect: "manual", headers: { cookie, "content-type": "application/x-www-form-urlencoded", ...headers }, body });
  assert.equal((await post({ origin: srv.base }, "pattern=x.*&action=block")).status, 403, "no CSRF token");
  const csrf = await page.evaluate(() => document.querySelector("input[name=csrf]").value);
  assert.equal((await post({ origin: "https://evil.example" }, `csrf=${csrf}&pattern=x.*&action=block`)).status, 403, "another origin");
  assert.equal((await post({ origin: srv.base }, `csrf=${csrf}&pattern=x.*&action=block`)).status, 303, "both: accepted");
  // Without a script, Preview shows what a typed pattern matches, and saves nothing.
  const before = (await (await fetch(url("/console/policies"), { headers: { cookie } })).text()).match(/<tr>/g).length;
  const preview = await fetch(url("/console/policies/preview"), {
    method: "POST",
    headers: { cookie, origin: srv.base, "content-type": "application/x-www-form-urlencoded" },
    body: `csrf=${csrf}&pattern=shop.*.createItem&action=block`,
  });
  assert.equal(preview.status, 200);
  const previewed = await preview.text();
  assert.match(previewed, /matches 1 tool/);
  assert.match(previewed, /value="shop\.\*\.createItem"/, "the typed pattern stays in the form");
  const after = (await (await fetch(url("/console/policies"), { headers: { cookie } })).text()).match(/<tr>/g).length;
  assert.equal(after, before, "a preview adds no rule");
  const framed = await fetch(url("/console/policies"), { headers: { cookie } });
  assert.equal(framed.headers.get("x-frame-options"), "DENY");
});
