// SPEC §8 GraphQL end to end: a real GraphQL engine (graphql-js behind
// graphql-http, the reference GraphQL-over-HTTP server) on loopback, added
// by introspecting its endpoint and from an SDL file, its root fields
// called from `execute`: variables, `select`, errors with partial data,
// mutations paused for approval, the bearer token injected by the host.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildSchema } from "graphql";
import { createHandler } from "graphql-http/lib/use/http";
import { startServer, connectSdk, runOk, BIN } from "./harness.mjs";

const SDL = `
"An instant, ISO 8601"
scalar DateTime

enum Role { ADMIN USER }

"What a new user is made of"
input NewUser { name: String!, role: Role = USER }

type User {
  id: ID!
  name: String!
  role: Role!
  joined: DateTime
  friends: [User!]!
  secret(reason: String!): String
}

type Query {
  "One user by id"
  user(id: ID!): User
  "Users, by role"
  users(role: Role, first: Int = 10): [User!]!
  version: String!
  whoami: String
}

type Mutation {
  "Add a user"
  createUser(input: NewUser!): User!
}
`;
const TOKEN = "gql-" + Math.random().toString(36).slice(2) + "-SECRET";

const people = [
  { id: "1", name: "Ada", role: "ADMIN", joined: "2020-01-01T00:00:00Z", friendIds: ["2"] },
  { id: "2", name: "Bob", role: "USER", joined: null, friendIds: [] },
];
const asUser = (p) => ({
  ...p,
  friends: () => p.friendIds.map((id) => asUser(people.find((q) => q.id === id))),
  secret: () => { throw new Error("secret is not for you"); },
});
const root = {
  user: ({ id }) => { const p = people.find((q) => q.id === id); return p ? asUser(p) : null; },
  users: ({ role, first }) => people.filter((p) => !role || p.role === role).slice(0, first).map(asUser),
  version: () => "1.0",
  whoami: (_args, context) => {
    if (context.auth !== `Bearer ${TOKEN}`) throw new Error("not signed in");
    return "ada";
  },
  createUser: ({ input }) => {
    const p = { id: String(people.length + 1), name: input.name, role: input.role, joined: null, friendIds: [] };
    people.push(p);
    return asUser(p);
  },
};

let api;
let seen;
let srv;
let client;
let dir;
const transcript = [];

before(async () => {
  seen = [];
  const handler = createHandler({
    schema: buildSchema(SDL),
    rootValue: root,
    context: (req) => ({ auth: req.raw.headers.authorization }),
    // Every request the engine receives, as it received it.
    onSubscribe: (req, params) => {
      seen.push({ method: req.method, headers: req.raw.headers, body: params });
    },
  });
  api = http.createServer(handler);
  await new Promise((r) => api.listen(0, "127.0.0.1", r));
  dir = mkdtempSync(join(tmpdir(), "executor-graphql-"));
  srv = await startServer({ args: ["--allow-local-network"] });
  ({ client } = await connectSdk(srv, srv.mint("graphql@example.com")));
  const endpoint = `http://127.0.0.1:${api.address().port}/graphql`;
  // Asynchronous: introspection asks the engine, which lives in this process.
  const added = await cliAsync("integrations", "add", "graphql", "--endpoint", endpoint, "--namespace", "gql", "--allow-local-network");
  assert.match(added, /gql: 5 tools/);
  cli("connections", "set", "gql", "--bearer", TOKEN);
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.cleanup();
  api?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const cli = (...args) => srv.cli([...args, "--data-dir", srv.dataDir]);
const cliAsync = (...args) =>
  new Promise((resolve, reject) =>
    execFile(BIN, [...args, "--data-dir", srv.dataDir], { env: srv.env }, (error, stdout, stderr) =>
      error ? reject(new Error(`${args.join(" ")}: ${stderr}`)) : resolve(stdout),
    ),
  );
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  transcript.push(JSON.stringify(r));
  return r;
};
const run = (code) => runOk(client, code, transcript);

test("graphql: introspected root fields are tools, listed and searched", async () => {
  assert.match(cli("integrations", "list"), /^gql\tgraphql\t5 tools\thttp:\/\/127\.0\.0\.1:\d+\/graphql\t.*\tok$/m);
  const listed = await run("return (await tools.search({ namespace: 'gql' })).items.map((i) => i.path)");
  assert.deepEqual(listed, ["gql.mutation.createUser", "gql.query.user", "gql.query.users", "gql.query.version", "gql.query.whoami"]);
  const found = await run("return (await tools.search({ query: 'add a user' })).items[0].path");
  assert.equal(found, "gql.mutation.createUser");
  const described = await run("return await tools.describe.tool({ path: 'gql.query.users' })");
  assert.match(described.inputTypeScript, /role\?:/);
  assert.match(described.inputTypeScript, /select\?: string/);
  assert.match(JSON.stringify(described), /ADMIN/);
});

test("graphql: a call is one named operation, its arguments as variables; the root field's value comes back", async () => {
  seen.length = 0;
  const one = await run("return await tools.gql.query.user({ id: '1' })");
  assert.equal(one.ok, true, JSON.stringify(one));
  assert.deepEqual(one.data, { id: "1", name: "Ada", role: "ADMIN", joined: "2020-01-01T00:00:00Z" });
  assert.equal(seen.length, 1);
  assert.equal(seen[0].body.operationName, "User");
  assert.match(seen[0].body.query, /^query User\(\$id: ID!\) \{ user\(id: \$id\) \{ id name role joined \} \}$/);
  assert.deepEqual(seen[0].body.variables, { id: "1" });
  const admins = await run("return await tools.gql.query.users({ role: 'ADMIN', select: 'name friends { name }' })");
  assert.deepEqual(admins.data, [{ name: "Ada", friends: [{ name: "Bob" }] }]);
  const version = await run("return await tools.gql.query.version({})");
  assert.equal(version.data, "1.0");
});

test("graphql: a bad select is invalid_tool_arguments and never sent", async () => {
  seen.length = 0;
  const bad = await run("return await tools.gql.query.user({ id: '1', select: 'id } } mutation M { createUser(input: {name: \"x\"}) { id' })");
  assert.equal(bad.ok, false);
  assert.equal(bad.error.code, "invalid_tool_arguments", JSON.stringify(bad));
  const unclosed = await run("return await tools.gql.query.user({ id: '1', select: 'id friends {' })");
  assert.equal(unclosed.error.code, "invalid_tool_arguments");
  assert.equal(seen.length, 0);
});

test("graphql: errors answer graphql_errors and keep the partial data", async () => {
  const partial = await run(`return await tools.gql.query.user({ id: '1', select: 'id secret(reason: "curiosity")' })`);
  assert.equal(partial.ok, false);
  assert.equal(partial.error.code, "graphql_errors");
  assert.equal(partial.error.message, "secret is not for you");
  assert.deepEqual(partial.error.details.data, { id: "1", secret: null });
  assert.equal(partial.error.details.errors.length, 1);
  const unknown = await run("return await tools.gql.query.user({ id: '1', select: 'nope' })");
  assert.equal(unknown.error.code, "graphql_errors", JSON.stringify(unknown));
  assert.match(unknown.error.message, /nope/);
});

test("graphql: the connection's bearer token is sent by the host and never seen", async () => {
  seen.length = 0;
  const me = await run("return await tools.gql.query.whoami({})");
  assert.equal(me.data, "ada", JSON.stringify(me));
  assert.equal(seen[0].headers.authorization, `Bearer ${TOKEN}`);
  assert.ok(!transcript.some((t) => t.includes(TOKEN)), "the token reached the agent");
});

test("graphql: a mutation waits for approval, then runs", async () => {
  seen.length = 0;
  const paused = await call("execute", { code: "return await tools.gql.mutation.createUser({ input: { name: 'Cy' } })" });
  assert.equal(paused.structuredContent.status, "waiting_for_interaction", JSON.stringify(paused));
  assert.equal(seen.length, 0, "nothing is sent before approval");
  const done = await call("resume", { executionId: paused.structuredContent.executionId, action: "accept" });
  assert.deepEqual(done.structuredContent.result.data, { id: "3", name: "Cy", role: "USER", joined: null });
  assert.deepEqual(seen[0].body.variables, { input: { name: "Cy" } });
});

test("graphql: refresh introspects again, with the connection's token", async () => {
  seen.length = 0;
  await cliAsync("integrations", "refresh", "gql", "--allow-local-network");
  const asked = seen.filter((r) => r.body.query.includes("__schema"));
  assert.equal(asked.length, 1, JSON.stringify(seen.map((r) => r.body.operationName)));
  assert.equal(asked[0].headers.authorization, `Bearer ${TOKEN}`);
  assert.match(cli("integrations", "list"), /^gql\tgraphql\t5 tools\t/m);
});

test("graphql: a schema file (SDL) gives the same tools; refresh re-reads it", async () => {
  const file = join(dir, "schema.graphql");
  writeFileSync(file, SDL);
  const endpoint = `http://127.0.0.1:${api.address().port}/graphql`;
  assert.match(cli("integrations", "add", "graphql", "--endpoint", endpoint, "--schema", file, "--namespace", "fromfile"), /fromfile: 5 tools/);
  const fromFile = await run("return await tools.fromfile.query.user({ id: '2' })");
  assert.deepEqual(fromFile.data, { id: "2", name: "Bob", role: "USER", joined: null });
  writeFileSync(file, SDL.replace("version: String!", "version: String!\n  build: String"));
  cli("integrations", "refresh", "fromfile");
  assert.match(cli("integrations", "list"), /^fromfile\tgraphql\t6 tools\t/m);
  cli("integrations", "remove", "fromfile");
});
