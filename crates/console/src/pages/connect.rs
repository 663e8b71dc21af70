//! Connect a client (SPEC §14): the MCP URL and ready-to-copy setup for
//! each client, as the README's "Connect a client" says it.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};

use crate::ConsoleState;
use crate::layout::{self, Section};
use crate::viewer::Viewer;

pub(crate) async fn page(State(state): State<ConsoleState>, viewer: Viewer) -> Response {
    let mcp = format!("{}/mcp", viewer.base);
    let https = viewer.base.starts_with("https://");
    let body = html! {
        p.lede { "Clients connect to one URL and log in with a browser (OAuth): you sign in here and allow them for an org. "
            "A client that cannot log in is given an API token instead (" a href=(viewer.href("/console/clients#tokens")) { "Clients → API tokens" } ")." }
        p { "MCP URL: " input.secret type="text" readonly value=(mcp) aria-label="The MCP URL" size="50"; }
        (client("Claude Code", &format!("claude mcp add --transport http executor {mcp}"),
            "Then run /mcp in Claude Code, pick executor and Authenticate."))
        (client("Cursor", &format!("{{\"mcpServers\": {{\"executor\": {{\"url\": \"{mcp}\"}}}}}}"),
            "Add this to ~/.cursor/mcp.json; Cursor shows \"Needs login\" — click it."))
        (client("VS Code", &format!("code --add-mcp '{{\"name\":\"executor\",\"type\":\"http\",\"url\":\"{mcp}\"}}'"),
            "VS Code asks to authenticate on first use."))
        (client("MCP Inspector", &format!("npx @modelcontextprotocol/inspector  # URL {mcp}, transport Streamable HTTP"),
            "Then Open Auth Settings → Quick OAuth Flow."))
        (client("Codex", &format!("codex mcp add executor --url {mcp}\ncodex mcp login executor"), ""))
        (client("stdio clients", "executor mcp --email you@example.com",
            "A client that starts a command instead of a URL runs this on this machine; it acts for the account named."))
        section.client {
            h2 { "Where approvals are decided" }
            p { "A call that needs approval pauses, and can always be decided in "
                a href=(viewer.href("/console/approvals")) { "Approvals" } ". Who else may decide it depends on the URL the client uses:" }
            dl {
                dt { code { (mcp) } }
                dd { "The agent asks you, then decides with its " code { "resume" } " tool." }
                dt { code { (mcp) "?elicitation_mode=native" } }
                dd { "A client that can show MCP elicitations asks you itself." }
                dt { code { (mcp) "?elicitation_mode=console" } }
                dd { "Only a person here decides: the agent is given the approval's link, and its "
                    code { "resume" } " waits for your decision." }
            }
        }
        section.client {
            h2 { "Claude.ai, Claude Desktop connectors and ChatGPT" }
            @if https {
                p { "Add " code { (mcp) } " as a custom connector; the vendor's cloud reaches it and you log in here." }
            } @else {
                p.notice { "These connect from the vendor's cloud, so the server needs a public https URL: run it behind TLS with "
                    code { "--public-url https://mcp.example.com" } " and add " code { "https://mcp.example.com/mcp" } " as a custom connector." }
            }
        }
    };
    layout::page(&state, &viewer, Section::Connect, "Connect a client", body).await
}

fn client(name: &str, setup: &str, note: &str) -> Markup {
    html! {
        section.client {
            h2 { (name) }
            pre.copy { code { (setup) } }
            @if !note.is_empty() { p { (note) } }
        }
    }
}
