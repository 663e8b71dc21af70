//! Changing integrations from the console (SPEC §14): add one — OpenAPI
//! from a URL or an uploaded file, GraphQL, MCP over HTTP, and MCP as a
//! command when the server may start commands — after a preview of what
//! it would bring (its tools, how it authenticates and is reached, the
//! import's warnings, whether it asks for a login first); refresh or
//! remove one; set, test,
//! remove or log in a connection (secrets are write-only: a password
//! field in, never a value out); run one tool with JSON arguments.

use axum::extract::{Path, State};
use axum::response::{Redirect, Response};
use executor_ops::{
    AddIntegration, ApprovalMode, CredentialInput, DocumentSource, GraphqlSchemaSource,
    HttpTransport, IntegrationAdded, LoginFlow, LoginStarted, McpEndpoint, SetConnection,
    StartLogin,
};
use executor_store::CredentialKind;
use maud::{Markup, html};
use serde::Deserialize;
use zeroize::Zeroizing;

use crate::ConsoleState;
use crate::error::ConsoleError;
use crate::format;
use crate::layout::{self, Section};
use crate::pages::clients::Nothing;
use crate::pages::integrations;
use crate::viewer::{Posted, PostedUpload, Viewer};

/// Tools a preview lists.
const PREVIEW_LISTED: usize = 100;

pub(crate) async fn new_page(State(state): State<ConsoleState>, viewer: Viewer) -> Response {
    let body = add_forms(&viewer, None, stdio_allowed(&state));
    layout::page(
        &state,
        &viewer,
        Section::Integrations,
        "Add an integration",
        body,
    )
    .await
}

fn csrf(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name="csrf" value=(viewer.csrf); }
}

fn namespace_field(id: &str, value: &str) -> Markup {
    html! {
        label for=(id) { "Namespace" }
        input id=(id) type="text" name="namespace" required value=(value) placeholder="github" size="20"
            aria-describedby={ (id) "-help" };
        small id={ (id) "-help" } .muted { "Its tools are called tools." (if value.is_empty() { "NAMESPACE" } else { value }) ".…" }
    }
}

/// Whether this server starts commands for MCP integrations
/// (`--allow-stdio-integrations`): the stdio form is shown only then.
fn stdio_allowed(state: &ConsoleState) -> bool {
    state.ops.surface().may_start_commands
}

/// The add forms; `error` is a problem with the last attempt; `stdio`:
/// with the form of an MCP server started as a command.
fn add_forms(viewer: &Viewer, error: Option<&str>, stdio: bool) -> Markup {
    let action = viewer.href("/console/integrations/new");
    html! {
        @if let Some(error) = error { p.problem role="alert" { (error) } }
        section.add aria-labelledby="add-openapi" {
            h2 id="add-openapi" { "OpenAPI" }
            form.stack method="post" action=(action) enctype="multipart/form-data" {
                (csrf(viewer))
                input type="hidden" name="kind" value="openapi";
                (namespace_field("openapi-ns", ""))
                label for="openapi-url" { "Document URL" }
                input id="openapi-url" type="url" name="url" placeholder="https://api.example.com/openapi.json" size="50";
                label for="openapi-file" { "…or upload the document (JSON or YAML)" }
                input id="openapi-file" type="file" name="file" accept=".json,.yaml,.yml,application/json,application/yaml";
                label for="openapi-base" { "Base URL (optional: over the document's servers)" }
                input id="openapi-base" type="url" name="base_url" size="50";
                div.buttons {
                    button type="submit" name="intent" value="preview" { "Preview" }
                    button type="submit" name="intent" value="add" { "Add" }
                }
            }
        }
        section.add aria-labelledby="add-graphql" {
            h2 id="add-graphql" { "GraphQL" }
            form.stack method="post" action=(action) enctype="multipart/form-data" {
                (csrf(viewer))
                input type="hidden" name="kind" value="graphql";
                (namespace_field("graphql-ns", ""))
                label for="graphql-endpoint" { "Endpoint" }
                input id="graphql-endpoint" type="url" name="url" required placeholder="https://api.example.com/graphql" size="50";
                label for="graphql-file" { "Schema file (optional: else the endpoint is asked)" }
                input id="graphql-file" type="file" name="file" accept=".json,.graphql,.gql";
                div.buttons {
                    button type="submit" name="intent" value="preview" { "Preview" }
                    button type="submit" name="intent" value="add" { "Add" }
                }
            }
        }
        section.add aria-labelledby="add-mcp" {
            h2 id="add-mcp" { "MCP server" }
            form.stack method="post" action=(action) enctype="multipart/form-data" {
                (csrf(viewer))
                input type="hidden" name="kind" value="mcp";
                (namespace_field("mcp-ns", ""))
                label for="mcp-url" { "URL" }
                input id="mcp-url" type="url" name="url" required placeholder="https://mcp.example.com/mcp" size="50";
                label for="mcp-transport" { "Transport" }
                select id="mcp-transport" name="transport" {
                    option value="auto" { "auto (Streamable HTTP, else SSE)" }
                    option value="streamable-http" { "Streamable HTTP" }
                    option value="sse" { "SSE (legacy)" }
                }
                div.buttons {
                    button type="submit" name="intent" value="preview" { "Probe" }
                    button type="submit" name="intent" value="add" { "Add" }
                }
            }
        }
        @if stdio {
            section.add aria-labelledby="add-stdio" {
                h2 id="add-stdio" { "MCP server started as a command" }
                p.muted { "This server starts the command on its own machine and speaks MCP on its stdin and stdout. "
                    "Adding it starts it once to list its tools. Its environment is kept sealed and never shown again, so there is no probe." }
                form.stack method="post" action=(action) enctype="multipart/form-data" {
                    (csrf(viewer))
                    input type="hidden" name="kind" value="mcp-stdio";
                    (namespace_field("stdio-ns", ""))
                    label for="stdio-command" { "Command" }
                    input id="stdio-command" type="text" name="command" required placeholder="npx" size="40";
                    label for="stdio-args" { "Arguments, one per line" }
                    textarea id="stdio-args" name="args" rows="3" cols="50" placeholder="-y\n@modelcontextprotocol/server-everything" {}
                    label for="stdio-env" { "Environment, NAME=value per line (optional)" }
                    textarea id="stdio-env" name="env" rows="2" cols="50" autocomplete="off" spellcheck="false" {}
                    div.buttons {
                        button type="submit" name="intent" value="add" { "Add" }
                    }
                }
            }
        }
    }
}

/// What a posted add form asks for.
fn requested(upload: &PostedUpload) -> Result<AddIntegration, ConsoleError> {
    let namespace = upload.field("namespace").to_string();
    let url = upload.field("url").to_string();
    let file = upload
        .file
        .as_ref()
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned());
    let missing = |what: &str| ConsoleError::BadForm(format!("{what} is required"));
    match upload.field("kind") {
        "openapi" => {
            let spec = match (
                file,
                upload.fields.get("document").filter(|d| !d.is_empty()),
            ) {
                (Some(text), _) => DocumentSource::Text(text),
                (None, Some(text)) => DocumentSource::Text(text.clone()),
                (None, None) if !url.is_empty() => DocumentSource::Url(url),
                (None, None) => return Err(missing("a document URL or file")),
            };
            Ok(AddIntegration::OpenApi {
                namespace,
                spec,
                base_url: Some(upload.field("base_url").to_string()).filter(|b| !b.is_empty()),
            })
        }
        "graphql" => {
            if url.is_empty() {
                return Err(missing("the endpoint"));
            }
            let schema = match (
                file,
                upload.fields.get("document").filter(|d| !d.is_empty()),
            ) {
                (Some(text), _) => GraphqlSchemaSource::Text(text),
                (None, Some(text)) => GraphqlSchemaSource::Text(text.clone()),
                (None, None) => GraphqlSchemaSource::Introspect,
            };
            Ok(AddIntegration::Graphql {
                namespace,
                endpoint: url,
                schema,
            })
        }
        "mcp" => {
            if url.is_empty() {
                return Err(missing("the URL"));
            }
            let transport = match upload.field("transport") {
                "" => HttpTransport::Auto,
                word => word
                    .parse::<HttpTransport>()
                    .map_err(ConsoleError::BadForm)?,
            };
            Ok(AddIntegration::Mcp {
                namespace,
                endpoint: McpEndpoint::Http { url, transport },
            })
        }
        "mcp-stdio" => {
            let command = upload.field("command").trim().to_string();
            if command.is_empty() {
                return Err(missing("the command"));
            }
            let lines = |field: &str| -> Vec<String> {
                upload
                    .field(field)
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect()
            };
            let env = lines("env")
                .into_iter()
                .map(|line| match line.split_once('=') {
                    Some((name, value)) if !name.trim().is_empty() => {
                        Ok((name.trim().to_string(), value.to_string()))
                    }
                    _ => Err(ConsoleError::BadForm(
                        "each environment line is NAME=value".into(),
                    )),
                })
                .collect::<Result<_, _>>()?;
            Ok(AddIntegration::Mcp {
                namespace,
                endpoint: McpEndpoint::Stdio {
                    command,
                    args: lines("args"),
                    env,
                },
            })
        }
        _ => Err(ConsoleError::BadForm(
            "the kind must be openapi, graphql or mcp".into(),
        )),
    }
}

/// Preview (nothing is stored) or add, from the add page's forms.
pub(crate) async fn add(
    State(state): State<ConsoleState>,
    upload: PostedUpload,
) -> Result<Response, ConsoleError> {
    let input = requested(&upload)?;
    let viewer = &upload.viewer;
    let local = state.ops.surface().allow_local_network;
    if upload.field("intent") == "preview" {
        let preview = match state
            .ops
            .preview_integration(&viewer.actor, input.clone(), local)
            .await
        {
            Ok(preview) => preview,
            Err(e) => {
                let body = add_forms(viewer, Some(&e.message), stdio_allowed(&state));
                return Ok(layout::page(
                    &state,
                    viewer,
                    Section::Integrations,
                    "Add an integration",
                    body,
                )
                .await);
            }
        };
        let body = preview_page(&upload, &preview);
        return Ok(layout::page(&state, viewer, Section::Integrations, "Preview", body).await);
    }
    let namespace = input.namespace().to_string();
    match state
        .ops
        .add_integration(&viewer.actor, input, local, &mut |_, _| {})
        .await
    {
        Ok(added) => {
            tracing::info!(namespace = %namespace, tools = added.integration.tool_count, "integration added in the console");
            Ok(redirect(
                viewer,
                &format!("/console/integrations/{namespace}"),
            ))
        }
        Err(e) => {
            let body = add_forms(viewer, Some(&e.message), stdio_allowed(&state));
            Ok(layout::page(
                &state,
                viewer,
                Section::Integrations,
                "Add an integration",
                body,
            )
            .await)
        }
    }
}

fn redirect(viewer: &Viewer, path: &str) -> Response {
    axum::response::IntoResponse::into_response(Redirect::to(&viewer.href(path)))
}

/// What an add would bring, and the form that adds it (an uploaded
/// document rides along as a hidden field, so it is not chosen again).
fn preview_page(upload: &PostedUpload, preview: &IntegrationAdded) -> Markup {
    let viewer = &upload.viewer;
    let document = upload
        .file
        .as_ref()
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
        .or_else(|| upload.fields.get("document").cloned())
        .unwrap_or_default();
    let i = &preview.integration;
    html! {
        dl.facts {
            dt { "Namespace" } dd { (i.namespace) }
            dt { "Kind" } dd { (i.kind) }
            dt { "Tools" } dd { (i.tool_count) }
            @if let Some(base) = &i.base_url { dt { "Base URL" } dd { code { (base) } } }
            @if let Some(transport) = &i.transport { dt { "Transport" } dd { (transport) } }
            dt { "Authentication" } dd {
                @if i.auth.is_empty() { "none declared" } @else { (i.auth.join("; ")) }
            }
            dt { "State" } dd { (i.state.as_str()) @if i.status != "ok" { " (" (i.status) ")" } }
            dt { "Read in" } dd { (format::duration(preview.elapsed_ms as i64)) }
        }
        @if !i.auth.is_empty() && !preview.needs_login {
            p.notice { "Its calls need a credential: after adding it, set one on its page (or Connect, for OAuth)." }
        }
        @if preview.needs_login {
            p.notice { "This server asks for an OAuth login first: add it, then Connect on its page." }
        }
        @if !preview.warnings.is_empty() {
            h2 { "Warnings" }
            ul { @for w in &preview.warnings { li { (w) } } }
        }
        h2 { "Tools" }
        @if preview.tools.is_empty() { p.empty { "No tool." } } @else {
            ul.tools { @for t in preview.tools.iter().take(PREVIEW_LISTED) { li { code { (t) } } } }
            @if preview.tools.len() > PREVIEW_LISTED { p.muted { "…and " (preview.tools.len() - PREVIEW_LISTED) " more." } }
        }
        form.stack method="post" action=(viewer.href("/console/integrations/new")) enctype="multipart/form-data" {
            (csrf(viewer))
            @for name in ["kind", "namespace", "url", "base_url", "transport"] {
                input type="hidden" name=(name) value=(upload.field(name));
            }
            @if !document.is_empty() { input type="hidden" name="document" value=(document); }
            div.buttons {
                button type="submit" name="intent" value="add" { "Add " (i.namespace) }
                a href=(viewer.href("/console/integrations/new")) { "Start over" }
            }
        }
    }
}

pub(crate) async fn refresh(
    State(state): State<ConsoleState>,
    Path(namespace): Path<String>,
    posted: Posted<Nothing>,
) -> Result<Response, ConsoleError> {
    let viewer = posted.viewer;
    let local = state.ops.surface().allow_local_network;
    let refreshed = state
        .ops
        .refresh_integration(&viewer.actor, &namespace, local, &mut |_, _| {})
        .await?;
    let notice = html! { p.notice role="status" { "Refreshed: " (refreshed.integration.tool_count) " tools." } };
    integrations::render_detail(&state, &viewer, &namespace, "", Some(notice)).await
}

pub(crate) async fn remove(
    State(state): State<ConsoleState>,
    Path(namespace): Path<String>,
    posted: Posted<Nothing>,
) -> Result<Response, ConsoleError> {
    let viewer = posted.viewer;
    state
        .ops
        .remove_integration(&viewer.actor, &namespace)
        .await?;
    tracing::info!(namespace = %namespace, "integration removed in the console");
    Ok(redirect(&viewer, "/console/integrations"))
}

/// The connection forms of an integration's page.
pub(crate) fn connection_forms(viewer: &Viewer, namespace: &str, has_connection: bool) -> Markup {
    let base = viewer.href(&format!("/console/integrations/{namespace}/connection"));
    html! {
        form.stack method="post" action=(base) {
            (csrf(viewer))
            fieldset {
                legend { @if has_connection { "Replace the credential" } @else { "Set a credential" } }
                label for="cred-kind" { "Kind" }
                select id="cred-kind" name="kind" {
                    option value="bearer" { "Bearer token" }
                    option value="api_key" { "API key (where the API says)" }
                    option value="basic" { "Basic (user name and password)" }
                    option value="env" { "A reference to the server's environment (env://NAME)" }
                }
                label for="cred-user" { "User name (Basic only)" }
                input id="cred-user" type="text" name="username" autocomplete="off";
                label for="cred-value" { "Secret, or env://NAME" }
                input id="cred-value" type="password" name="value" required autocomplete="new-password";
                div.buttons { button type="submit" { "Save the credential" } }
            }
        }
        div.buttons {
            form.inline method="post" action={ (base) "/test" } { (csrf(viewer)) button type="submit" { "Test the connection" } }
            form.inline method="post" action={ (base) "/login" } { (csrf(viewer)) button type="submit" { "Connect with OAuth" } }
            @if has_connection {
                form.inline method="post" action={ (base) "/remove" } { (csrf(viewer)) button.danger type="submit" { "Remove the credential" } }
            }
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct CredentialForm {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    value: Zeroizing<String>,
}

pub(crate) async fn set_connection(
    State(state): State<ConsoleState>,
    Path(namespace): Path<String>,
    posted: Posted<CredentialForm>,
) -> Result<Response, ConsoleError> {
    let Posted { viewer, form } = posted;
    let value = Zeroizing::new(form.value.trim().to_string());
    let username = form.username.trim().to_string();
    let credential =
        if let Some(reference) = value.strip_prefix("env://").map(|_| value.to_string()) {
            let kind = match form.kind.as_str() {
                "bearer" => CredentialKind::Bearer,
                "basic" => CredentialKind::Basic,
                _ => CredentialKind::ApiKey,
            };
            CredentialInput::Reference {
                reference,
                kind,
                username: Some(username).filter(|u| !u.is_empty()),
            }
        } else {
            match form.kind.as_str() {
                "bearer" => CredentialInput::Bearer(value),
                "api_key" => CredentialInput::ApiKey(value),
                "basic" => CredentialInput::Basic {
                    username,
                    password: value,
                },
                "env" => {
                    return Err(ConsoleError::BadForm(
                        "a reference is written env://NAME".into(),
                    ));
                }
                _ => return Err(ConsoleError::BadForm("unknown credential kind".into())),
            }
        };
    state
        .ops
        .set_connection(
            &viewer.actor,
            SetConnection {
                namespace: namespace.clone(),
                credential,
            },
        )
        .await?;
    tracing::info!(namespace = %namespace, "connection set in the console");
    let notice = html! { p.notice role="status" { "The credential is saved (sealed; it is never shown again)." } };
    integrations::render_detail(&state, &viewer, &namespace, "", Some(notice)).await
}

pub(crate) async fn test_connection(
    State(state): State<ConsoleState>,
    Path(namespace): Path<String>,
    posted: Posted<Nothing>,
) -> Result<Response, ConsoleError> {
    let viewer = posted.viewer;
    let local = state.ops.surface().allow_local_network;
    let tested = state
        .ops
        .test_connection(&viewer.actor, &namespace, local)
        .await?;
    let class = if tested.ok { "notice ok" } else { "notice bad" };
    let notice = html! {
        p class=(class) role="status" {
            @if tested.ok { "The connection works: " } @else { "The connection failed: " }
            (tested.message) " (" code { (tested.request) }
            @if let Some(status) = tested.status { ", HTTP " (status) }
            ", " (format::duration(tested.elapsed_ms as i64)) ")."
        }
    };
    integrations::render_detail(&state, &viewer, &namespace, "", Some(notice)).await
}

pub(crate) async fn remove_connection(
    State(state): State<ConsoleState>,
    Path(namespace): Path<String>,
    posted: Posted<Nothing>,
) -> Result<Response, ConsoleError> {
    let viewer = posted.viewer;
    state
        .ops
        .remove_connection(&viewer.actor, &namespace)
        .await?;
    let notice = html! { p.notice role="status" { "The credential is removed." } };
    integrations::render_detail(&state, &viewer, &namespace, "", Some(notice)).await
}

/// Connect: an OAuth login; the person continues at the provider (a link:
/// the console's pages post forms only to themselves) and comes back
/// through `/oauth/callback`.
pub(crate) async fn login(
    State(state): State<ConsoleState>,
    Path(namespace): Path<String>,
    posted: Posted<Nothing>,
) -> Result<Response, ConsoleError> {
    let viewer = posted.viewer;
    let ask = StartLogin {
        namespace: namespace.clone(),
        flow: Some(LoginFlow::AuthorizationCode),
        allow_local_network: state.ops.surface().allow_local_network,
        ..StartLogin::default()
    };
    match state.ops.start_login(&viewer.actor, ask, None).await? {
        LoginStarted::Connected { note, .. } => {
            let notice = html! { p.notice role="status" { "Connected." @if let Some(n) = note { " " (n) } } };
            integrations::render_detail(&state, &viewer, &namespace, "", Some(notice)).await
        }
        LoginStarted::Browser {
            authorization_url, ..
        } => {
            // The URL comes from the provider's metadata: only a web URL
            // becomes a link.
            if !authorization_url.starts_with("https://")
                && !authorization_url.starts_with("http://")
            {
                return Err(ConsoleError::Op(executor_ops::OpError::upstream(
                    "the provider's authorization URL is not a web URL",
                )));
            }
            let host = url_host(&authorization_url);
            let body = html! {
                p { "Log in at " strong { (host) } " and allow access; you come back here when it is done." }
                p { a.button href=(authorization_url) rel="noreferrer" { "Continue to " (host) } }
                p { a href=(viewer.href(&format!("/console/integrations/{namespace}"))) { "Cancel" } }
            };
            Ok(layout::page(&state, &viewer, Section::Integrations, "Connect", body).await)
        }
    }
}

fn url_host(url: &str) -> String {
    url.split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(rest))
        .unwrap_or(url)
        .to_string()
}

#[derive(Deserialize)]
pub(crate) struct RunForm {
    #[serde(default)]
    arguments: String,
}

/// Runs one tool as the signed-in person (their own call: an approval it
/// would need counts as given; a block still applies).
pub(crate) async fn run_tool(
    State(state): State<ConsoleState>,
    Path(path): Path<String>,
    posted: Posted<RunForm>,
) -> Result<Response, ConsoleError> {
    let Posted { viewer, form } = posted;
    let text = if form.arguments.trim().is_empty() {
        "{}"
    } else {
        form.arguments.as_str()
    };
    let arguments: serde_json::Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            let notice =
                html! { p.problem role="alert" { "The arguments are not JSON: " (e.to_string()) } };
            return integrations::render_tool(&state, &viewer, &path, text, Some(notice)).await;
        }
    };
    let result = state
        .ops
        .call_tool(
            &viewer.actor,
            &path,
            &arguments,
            ApprovalMode::GivenByCaller,
        )
        .await?;
    let class = if result.is_error {
        "notice bad"
    } else {
        "notice ok"
    };
    let notice = html! {
        div class=(class) role="status" {
            p { @if result.is_error { "The call failed:" } @else { "The call answered:" } }
            @if let Some(v) = &result.structured { pre { (format::json(v)) } } @else { pre { (result.text) } }
        }
    };
    integrations::render_tool(&state, &viewer, &path, text, Some(notice)).await
}
