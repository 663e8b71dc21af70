#!/usr/bin/env node
// The browser step of an OAuth client that is not written in JavaScript
// (tests/python/test_oauth.py): a fresh chromium signs in with a one-time
// login link and approves one authorization request, as browser.mjs does
// for the TypeScript tests.
//
//   node browser-approve.mjs --login-link URL --authorize URL [--client-name NAME] [--org NAME]
//
// Prints the URL the browser was sent to (the client's redirect URI with
// code, state and iss) alone on stdout and exits 0; any failure is
// reported on stderr with a non-zero exit. The browser is closed either way.
import { parseArgs } from "node:util";
import { launchBrowser, signIn, approve } from "./browser.mjs";

const { values } = parseArgs({
  options: {
    "login-link": { type: "string" },
    authorize: { type: "string" },
    "client-name": { type: "string" },
    org: { type: "string" },
  },
  strict: true,
});
if (!values["login-link"] || !values.authorize) {
  console.error("usage: browser-approve.mjs --login-link URL --authorize URL [--client-name NAME] [--org NAME]");
  process.exit(2);
}

const session = await launchBrowser();
let code = 0;
try {
  await signIn(session.page, values["login-link"]);
  const back = await approve(session.page, values.authorize, { clientName: values["client-name"], org: values.org });
  process.stdout.write(`${back.url}\n`);
} catch (e) {
  console.error(`browser-approve: ${e.stack ?? e}`);
  code = 1;
} finally {
  await session.close();
}
process.exit(code);
