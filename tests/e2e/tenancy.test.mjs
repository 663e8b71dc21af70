// SPEC §4 tenancy: an account's personal org belongs to it alone. `token
// create --org <someone else's email>` neither creates nor joins that
// account's personal org, so what one account adds never shows in
// another's sessions.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { startServer, connectSdk, runOk } from "./harness.mjs";

const SPEC = fileURLToPath(new URL("./fixtures/petstore.yaml", import.meta.url));
let srv;
before(async () => {
  srv = await startServer();
});
after(async () => {
  await srv?.cleanup();
});

const cli = (...args) => srv.cli([...args, "--data-dir", srv.dataDir]);
/** Runs the CLI, which must fail; returns its stderr. */
const refused = (run) => {
  let stderr;
  assert.throws(run, (e) => {
    stderr = String(e.stderr ?? "");
    return true;
  });
  return stderr;
};
const namespaces = async (bearer) => {
  const { client } = await connectSdk(srv, bearer);
  try {
    const listed = await runOk(client, "return await tools.executor.integrations.list({})");
    const searched = await runOk(client, "return (await tools.search({ namespace: 'carolpets' })).total");
    return { listed: listed.items.map((i) => i.namespace), searched };
  } finally {
    await client.close();
  }
};

test("hardening: personal orgs belong to their account — --org with another account's email is refused", async () => {
  // Before dave has an account: carol cannot take the name of his personal org.
  const early = refused(() => srv.mint("carol@c.test", "dave@d.test"));
  assert.match(early, /"dave@d\.test" is the personal org of the account dave@d\.test/, early);
  assert.match(early, /belongs to its account alone/, early);
  assert.match(refused(() => cli("integrations", "list", "--org", "dave@d.test")), /no org named/, "nothing was created");

  // Carol's integration lives in her personal org.
  const carol = srv.mint("carol@c.test");
  assert.match(cli("integrations", "add", "openapi", "--spec", SPEC, "--namespace", "carolpets", "--org", "carol@c.test"), /carolpets: 3 tools/);
  assert.deepEqual(await namespaces(carol), { listed: ["carolpets", "executor"], searched: 3 });

  // Dave's token lands in his own org, which sees nothing of carol's.
  const dave = srv.mint("dave@d.test");
  assert.deepEqual(await namespaces(dave), { listed: ["executor"], searched: 0 });
  const daveByName = srv.mint("dave@d.test", "Dave@D.test");
  assert.deepEqual(await namespaces(daveByName), { listed: ["executor"], searched: 0 });

  // Once dave exists, still refused, in any spelling.
  assert.match(refused(() => srv.mint("carol@c.test", "DAVE@d.test")), /personal org/);
  // A shared org (no '@') is joined by name, as before.
  srv.mint("carol@c.test", "pets-team");
  srv.mint("dave@d.test", "pets-team");
  assert.match(cli("integrations", "list", "--org", "pets-team"), /^$/);
});
