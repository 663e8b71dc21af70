//! The `skills` tool's texts, in our own words.

pub struct Skill {
    pub name: &'static str,
    pub summary: &'static str,
    pub body: &'static str,
}

pub const SKILLS: &[Skill] = &[Skill {
    name: "execute",
    summary: "How to write code for the execute tool: discover, describe and call tools.",
    body: EXECUTE_HOWTO,
}];

const EXECUTE_HOWTO: &str = r#"# Writing code for `execute`

`execute` runs a short TypeScript or JavaScript program in a sandbox. The
program is the body of an async function: use `await` and `return` at the top
level. The returned value is the tool result (strings as they are, everything
else as JSON). TypeScript types are stripped before the program runs.

## Discover
- `await tools.search({ query: "create issue", limit: 12, offset: 0 })` returns
  `{ items: [{ path, name, description, integration, score }], total, hasMore, nextOffset }`.
  Page with `offset: nextOffset` while `hasMore` is true.
- `await tools.executor.integrations.list({})` lists the connected integrations.
- `tools` cannot be enumerated (`Object.keys(tools)` throws): search instead.

## Read a tool's shape
- `await tools.describe.tool({ path: "github.issues.create" })` returns the
  input and output types as TypeScript.

## Call
- `const r = await tools.github.issues.create({ owner, repo, title })`.
- Every call resolves to `{ ok: true, data }` or `{ ok: false, error: { code, message } }`;
  check `r.ok` before using `r.data`.
- Calls that need a human's approval pause the execution; the result tells
  you how to continue with the `resume` tool.

## Show things to the user
- `emit(value)` sends a value to the user as its own content block; a
  `ToolFile` (`{ _tag: "ToolFile", name, mimeType, encoding: "base64", data, byteLength }`)
  is shown by its MIME type (images, audio, text, or an attached file).

## Not available
- `fetch`, the file system, processes, `require` and `import`: call APIs through `tools.*`.
- `console.log` and friends are captured and returned after the result.
"#;
