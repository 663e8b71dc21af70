// A real browser for the sign-in and consent steps of the built-in
// authorization server (SPEC §4, §14): Debian's chromium, driven by
// playwright-core (no browser download; tests/e2e/install-chromium installs
// chromium when it is missing). What a person does is what these helpers
// do: open the one-time login link and press its button, then open the
// client's /authorize URL, read the consent page and press Allow; the
// browser then follows the server's redirect to the client's redirect URI,
// as it would to a client's loopback listener.
//
// Used by authorization.test.mjs (the TypeScript SDK's OAuth flow), by
// browser-approve.mjs (the same for tests/python/test_oauth.py) and by
// tests/conformance/authorization.mjs (the conformance suite's
// authorization-code-grant scenario).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";

// The machine has no network but package registries: without the
// background-networking flags chromium's own connections (component
// updates, sync, field trials) are refused and slow every launch.
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Bounded waits: a step that hangs fails the test with what the page showed. */
const STEP_MS = 20_000;

/**
 * A fresh chromium (its own temporary profile, deleted by close()) with
 * one page. Returns { browser, context, page, close() }; close() never
 * throws, so that it can run in `finally` after a failure.
 */
export const launchBrowser = async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`no chromium at ${CHROMIUM}: run tests/e2e/install-chromium (or set CHROMIUM_BIN)`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, timeout: 60_000 });
  try {
    const context = await browser.newContext();
    context.setDefaultTimeout(STEP_MS);
    context.setDefaultNavigationTimeout(STEP_MS);
    const page = await context.newPage();
    const close = async () => {
      await browser.close().catch(() => {});
    };
    return { browser, context, page, close };
  } catch (e) {
    await browser.close().catch(() => {});
    throw e;
  }
};

/** What the page shows, for a failure message (a login link or a code in its URL left out). */
const shown = async (page) => {
  const text = await page
    .locator("body")
    .innerText({ timeout: 2000 })
    .catch(() => "(no body)");
  return `${page.url().replace(/([?&](?:link|code)=)[^&]*/g, "$1…")}: ${text.slice(0, 1500)}`;
};

/**
 * Signs the browser in with a one-time login link: the link's page has a
 * button (a GET never signs in), pressing it posts the form and the server
 * sets the session cookie and shows the signed-in page. Returns the cookie.
 */
export const signIn = async (page, loginLinkUrl) => {
  const link = new URL(loginLinkUrl);
  const res = await page.goto(link.href);
  assert.equal(res?.status(), 200, `the login link's page: ${await shown(page)}`);
  assert.equal(await page.locator("h1").innerText(), "Sign in to Executor", await shown(page));
  const [answer] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname.endsWith("/console/login")),
    page.getByRole("button", { name: "Sign in" }).click(),
  ]);
  assert.equal(answer.status(), 303, `POST /console/login: ${await shown(page)}`);
  await page.waitForLoadState("load");
  assert.equal(await page.locator("h1").innerText(), "Signed in", await shown(page));
  const cookies = await page.context().cookies(link.origin);
  const session = cookies.find((c) => c.name === "executor_session" || c.name === "__Host-executor_session");
  assert.ok(session, `no session cookie for ${link.origin}: ${JSON.stringify(cookies.map((c) => c.name))}`);
  assert.equal(session.httpOnly, true, "the session cookie is HttpOnly");
  assert.equal(session.sameSite, "Lax");
  return session;
};

/**
 * Approves a client's authorization request in a signed-in browser: opens
 * `authorizeUrl`, checks that the consent page names the client
 * (`clientName`, when given) and the host the answer goes to (the
 * redirect_uri's host, or `redirectHost`), picks `org` (its name) when
 * given, presses Allow and waits until the browser is sent to the client's
 * redirect URI. Returns that URL (code, state, iss): the navigation is
 * watched, so it is known whether or not a listener answers there; when
 * one does, its answer is awaited too (`status`).
 */
export const approve = async (page, authorizeUrl, { clientName, redirectHost, org, timeoutMs = STEP_MS } = {}) => {
  const asked = new URL(authorizeUrl);
  const presented = asked.searchParams.get("redirect_uri");
  const target = presented ? new URL(presented) : undefined;
  const res = await page.goto(asked.href);
  assert.equal(res?.status(), 200, `the consent page: ${await shown(page)}`);
  assert.equal(await page.locator("h1").innerText(), "Allow access?", await shown(page));
  if (clientName !== undefined) assert.equal(await page.locator(".box p b").first().innerText(), clientName, "the client's name is shown");
  const host = redirectHost ?? target?.hostname;
  if (host !== undefined) assert.equal(await page.locator(".box code").innerText(), host, "the redirect host is shown");
  if (org !== undefined) {
    const picker = page.locator("select[name=org]");
    if (await picker.count()) await picker.selectOption({ label: org });
    else assert.match(await page.locator("main").innerText(), new RegExp(`For the org ${org.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\.`));
  }
  // The redirect leaves the server's origin: the client's redirect URI (a
  // loopback one on another port), or, without redirect_uri, whatever the
  // client registered. An error page stays on the server's origin.
  const isTarget = (url) => {
    const u = new URL(url);
    return target ? u.origin === target.origin && u.pathname === target.pathname : u.origin !== asked.origin;
  };
  const leaving = page.waitForRequest((r) => r.isNavigationRequest() && isTarget(r.url()), { timeout: timeoutMs });
  await page.getByRole("button", { name: "Allow" }).click();
  let request;
  try {
    request = await leaving;
  } catch (e) {
    throw new Error(`Allow did not send the browser to ${target?.href ?? "the client"} within ${timeoutMs} ms (${e.message}); ${await shown(page)}`);
  }
  const previous = request.redirectedFrom();
  assert.equal(previous?.method(), "POST", "the browser got there by the consent form's redirect");
  assert.equal(new URL(previous.url()).origin, asked.origin);
  // A listener that answers is waited for (the conformance suite's closes
  // after its first request); none there is a failed navigation, null.
  let timer;
  const response = await Promise.race([
    request.response(),
    new Promise((_, rej) => (timer = setTimeout(() => rej(new Error(`${request.url()} did not answer within ${timeoutMs} ms`)), timeoutMs))),
  ]).finally(() => clearTimeout(timer));
  return { url: request.url(), status: response?.status() ?? null };
};
