//! Testing a connection: does the gateway reach the integration with it,
//! and does the upstream take it? One request the kind makes without side
//! effects, with the credential placed as a call would place it:
//! - an MCP server: list its tools (initialize, `tools/list`);
//! - a GraphQL API: `{ __typename }`;
//! - an OpenAPI API: `GET` of its base URL. No operation is neutral for
//!   every API, so only a refusal (401, 403) or a server error fails it;
//!   another 4xx shows the upstream took the request.
//!
//! A failed test is an answer (`ok: false`, and why), not an error: the
//! error is for a test that cannot be made (no such integration).

use std::time::Instant;

use executor_catalog::HostBudget;
use executor_integrations::IntegrationKind;
use executor_outbound::{Credential, CredentialSource, HttpClient, OutboundRequest, Placement};
use executor_store::IntegrationRecord;
use executor_upstream::{Discovery, Endpoint, EnvSecrets};
use reqwest::Method;
use serde::Serialize;
use utoipa::ToSchema;

use crate::{Actor, OpError, OpResult, Operations};

/// Room a test's answer may take (it is read, then dropped).
const TEST_ANSWER_BYTES: usize = 1 << 20;

/// How a connection test went.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTest {
    pub namespace: String,
    /// Whether the upstream took the request with the connection.
    pub ok: bool,
    /// The request made, e.g. `GET https://api.example.com/`.
    pub request: String,
    /// The upstream's HTTP status, when it answered.
    pub status: Option<u16>,
    /// What happened, in words.
    pub message: String,
    pub elapsed_ms: u64,
}

/// A test's verdict before it is timed.
struct Verdict {
    ok: bool,
    request: String,
    status: Option<u16>,
    message: String,
}

impl Verdict {
    fn failed(request: String, message: impl Into<String>) -> Self {
        Verdict {
            ok: false,
            request,
            status: None,
            message: message.into(),
        }
    }
}

impl Operations {
    /// Tests `namespace`'s connection (or, with none set, whether the
    /// integration answers without one).
    pub async fn test_connection(
        &self,
        actor: &Actor,
        namespace: &str,
        allow_local_network: bool,
    ) -> OpResult<ConnectionTest> {
        let started = Instant::now();
        let record = self.integration_record(actor, namespace).await?;
        let http = HttpClient::new(self.http_config(allow_local_network))
            .map_err(|e| OpError::internal("cannot build the HTTP client", e))?;
        let verdict = match self
            .parts
            .credentials
            .credential(&actor.org_id, namespace)
            .await
        {
            Err(e) => Verdict::failed(
                "(none: the credential cannot be opened)".into(),
                format!("the connection cannot be used: {}", e.message),
            ),
            Ok(credential) => {
                let credential = credential.unwrap_or(Credential::None);
                self.try_request(&record, &credential, &http).await?
            }
        };
        Ok(ConnectionTest {
            namespace: namespace.to_string(),
            ok: verdict.ok,
            request: verdict.request,
            status: verdict.status,
            message: verdict.message,
            elapsed_ms: started.elapsed().as_millis() as u64,
        })
    }

    async fn try_request(
        &self,
        record: &IntegrationRecord,
        credential: &Credential,
        http: &HttpClient,
    ) -> OpResult<Verdict> {
        let unreadable = |e: String| OpError::conflict("integration_unusable", e);
        let kind = record
            .integration_kind()
            .map_err(|e| unreadable(e.to_string()))?;
        match kind {
            IntegrationKind::Mcp => {
                let endpoint = executor_upstream::load(&record.document)
                    .map_err(unreadable)?
                    .endpoint;
                if matches!(endpoint, Endpoint::Stdio { .. }) && !self.surface().may_start_commands
                {
                    return Err(OpError::forbidden(
                        "this server does not start stdio MCP servers",
                    ));
                }
                let secrets = EnvSecrets {
                    key: self.parts.key.as_deref(),
                    org_id: &record.org_id,
                };
                Ok(list_tools(&record.namespace, &endpoint, credential, http, secrets).await)
            }
            IntegrationKind::Graphql => {
                let base = base_url(record)?;
                let mut request = OutboundRequest::new(Method::POST, String::new());
                request.headers.insert(
                    reqwest::header::CONTENT_TYPE,
                    reqwest::header::HeaderValue::from_static("application/json"),
                );
                request.body = Some(br#"{"query":"{ __typename }"}"#.to_vec());
                let placement = executor_graphql::invoker::placement(credential);
                let what = format!("POST {base} {{ __typename }}");
                Ok(send(http, base, request, credential, placement, what).await)
            }
            IntegrationKind::OpenApi => {
                let base = base_url(record)?;
                let stored = executor_openapi::load(&record.document)
                    .map_err(|e| unreadable(e.to_string()))?;
                let placement =
                    executor_openapi::credential_placement(&stored.auth_methods, credential);
                let request = OutboundRequest::new(Method::GET, String::new());
                let what = format!("GET {base}");
                Ok(send(http, base, request, credential, placement, what).await)
            }
        }
    }
}

fn base_url(record: &IntegrationRecord) -> OpResult<&str> {
    record.base_url.as_deref().ok_or_else(|| {
        OpError::conflict(
            "integration_unusable",
            format!("{} has no base URL to test against", record.namespace),
        )
    })
}

async fn list_tools(
    namespace: &str,
    endpoint: &Endpoint,
    credential: &Credential,
    http: &HttpClient,
    secrets: EnvSecrets<'_>,
) -> Verdict {
    let request = format!("tools/list at {}", endpoint.source());
    match executor_upstream::discover(namespace, endpoint, credential, http, secrets).await {
        Ok(Discovery::Ready(tools)) => Verdict {
            ok: true,
            request,
            status: None,
            message: format!("the server listed {} tools", tools.len()),
        },
        Ok(Discovery::NeedsLogin { .. }) => Verdict::failed(
            request,
            format!(
                "the server asks for a login: {}",
                executor_oauth::login_command(namespace)
            ),
        ),
        Err(why) => Verdict::failed(request, why.to_string()),
    }
}

/// Sends the test request; the answer's status decides.
async fn send(
    http: &HttpClient,
    base: &str,
    request: OutboundRequest,
    credential: &Credential,
    placement: Option<Placement<'_>>,
    what: String,
) -> Verdict {
    let budget = HostBudget::new(TEST_ANSWER_BYTES);
    match http
        .send(base, request, credential, placement, &budget)
        .await
    {
        Ok(answer) => Verdict {
            ok: true,
            request: what,
            status: Some(answer.status),
            message: format!("the upstream answered HTTP {}", answer.status),
        },
        Err(failure) => match failure.status {
            Some(status @ (401 | 403)) => Verdict {
                ok: false,
                request: what,
                status: Some(status),
                message: format!("the upstream refused the credential (HTTP {status})"),
            },
            Some(status) if status >= 500 => Verdict {
                ok: false,
                request: what,
                status: Some(status),
                message: format!("the upstream failed (HTTP {status})"),
            },
            Some(status) => Verdict {
                ok: true,
                request: what,
                status: Some(status),
                message: format!(
                    "the upstream answered HTTP {status} and did not refuse the credential"
                ),
            },
            None => Verdict::failed(what, failure.message),
        },
    }
}
