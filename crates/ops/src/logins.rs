//! OAuth logins to an integration (SPEC §9): what a login is for, read
//! from the integration's record; starting one; what a server does when
//! its `/oauth/callback` completes one; and how a started login ended.
//!
//! The browser comes back to a server's callback, so a login started by
//! any surface is completed by the server whose public URL it names (or,
//! with no server running, by the CLI's own listener).

use std::sync::Arc;

use executor_integrations::IntegrationKind;
use executor_oauth::{
    Challenge, Declared, Flow, Grant, LoginOptions, LoginTarget, OAuth, OAuthError, Resource,
    Started,
};
use executor_outbound::HttpClient;
use executor_store::secrets::SecretString;
use executor_store::{ConnectionStore, CredentialKind, IntegrationRecord, now_ms};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{Actor, ConnectionStatus, OpError, OpResult, Operations};

/// Where the browser comes back after the authorization server's consent.
#[derive(Debug, Clone)]
pub struct LoginCallback {
    /// `<public-url>/oauth/callback`.
    pub redirect_uri: String,
    /// Where our client ID metadata document is published, if anywhere.
    pub client_metadata_url: Option<String>,
}

impl LoginCallback {
    /// The callback of the server reached at `public_url`; our metadata
    /// document is at `metadata_url`, else on our own route when the
    /// public URL is https (the draft wants an https URL with a path).
    pub fn at(public_url: &str, metadata_url: Option<String>) -> Self {
        let public_url = public_url.trim_end_matches('/');
        LoginCallback {
            redirect_uri: format!("{public_url}/oauth/callback"),
            client_metadata_url: metadata_url.or_else(|| {
                public_url
                    .starts_with("https://")
                    .then(|| format!("{public_url}/oauth/client-metadata.json"))
            }),
        }
    }
}

/// A login to start.
#[derive(Debug, Default)]
pub struct StartLogin {
    pub namespace: String,
    /// A client registered with the authorization server beforehand.
    pub client_id: Option<String>,
    pub client_secret: Option<SecretString>,
    /// Scopes to ask for; empty: what the server asks for.
    pub scopes: Vec<String>,
    /// None: client credentials when it is the only grant offered.
    pub flow: Option<LoginFlow>,
    /// The authorization server, when nothing else names one.
    pub issuer: Option<String>,
    /// The RFC 8707 resource to ask tokens for.
    pub resource: Option<String>,
    /// Let discovery and the token requests reach loopback and private
    /// addresses (the CLI's flag; the API: the server's setting).
    pub allow_local_network: bool,
}

/// Which OAuth grant a login uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoginFlow {
    /// A person consents in a browser.
    AuthorizationCode,
    /// The client's own credentials; no person.
    ClientCredentials,
}

impl From<LoginFlow> for Flow {
    fn from(flow: LoginFlow) -> Flow {
        match flow {
            LoginFlow::AuthorizationCode => Flow::AuthorizationCode,
            LoginFlow::ClientCredentials => Flow::ClientCredentials,
        }
    }
}

/// What starting a login did.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LoginStarted {
    /// No person was needed (client credentials): the connection is set.
    Connected {
        connection: ConnectionStatus,
        /// A caveat, e.g. the MCP server's tools could not be listed yet.
        note: Option<String>,
    },
    /// A person opens `authorizationUrl`; the server's callback completes
    /// the login, whose state `loginId` reads.
    #[serde(rename_all = "camelCase")]
    Browser {
        authorization_url: String,
        login_id: String,
    },
}

/// How a started login stands.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LoginState {
    /// Waiting for the browser.
    Pending,
    /// Completed; `note` is a caveat, if any.
    Connected { note: Option<String> },
    /// Refused, expired or failed at the callback.
    Failed { message: String },
}

/// A login a server's callback completed.
#[derive(Debug, Clone)]
pub struct LoginFinished {
    pub namespace: String,
    /// A caveat: connected, but the MCP server's tools could not be listed.
    pub note: Option<String>,
}

impl Operations {
    /// Starts a login to `ask.namespace`'s integration, coming back to
    /// `callback` (None: this server's own).
    pub async fn start_login(
        &self,
        actor: &Actor,
        ask: StartLogin,
        callback: Option<&LoginCallback>,
    ) -> OpResult<LoginStarted> {
        let callback = callback
            .or(self.parts.login_callback.as_ref())
            .ok_or_else(|| OpError::unavailable("this process serves no OAuth callback"))?;
        let record = self.integration_record(actor, &ask.namespace).await?;
        let target = login_target(&actor.org_id, &record)?;
        let http = HttpClient::new(self.http_config(ask.allow_local_network))
            .map_err(|e| OpError::internal("cannot build the HTTP client", e))?;
        let oauth = self.login_oauth(http.clone())?;
        let options = LoginOptions {
            client_id: ask.client_id,
            client_secret: ask.client_secret,
            scopes: ask.scopes,
            flow: ask.flow.map(Flow::from),
            redirect_uri: callback.redirect_uri.clone(),
            client_metadata_url: callback.client_metadata_url.clone(),
            issuer: ask.issuer,
            resource: ask.resource,
        };
        match oauth
            .start_login(&target, options)
            .await
            .map_err(login_error)?
        {
            Started::Browser {
                authorization_url,
                state_hash,
            } => Ok(LoginStarted::Browser {
                authorization_url,
                login_id: state_hash,
            }),
            Started::Done(_) => {
                let note = self
                    .after_login(&actor.org_id, &ask.namespace, &http)
                    .await
                    .err();
                let connection = self.connection_status(actor, &ask.namespace).await?;
                Ok(LoginStarted::Connected { connection, note })
            }
        }
    }

    /// How the login `login_id` (from [`LoginStarted::Browser`]) to
    /// `namespace` stands, read in the actor's org only: another org's
    /// login, like an unknown one, is not found.
    pub async fn login_state(
        &self,
        actor: &Actor,
        namespace: &str,
        login_id: &str,
    ) -> OpResult<LoginState> {
        let found = self
            .store()
            .pending_login_of(&actor.org_id, namespace, login_id)
            .await?
            .ok_or_else(|| {
                OpError::not_found(format_args!("login {login_id:?} of {namespace:?}"))
            })?;
        Ok(match found.outcome {
            Some(text) => match executor_oauth::read_login_outcome(&text) {
                Ok(note) => LoginState::Connected { note },
                Err(message) => LoginState::Failed { message },
            },
            // A callback that came after the deadline never settles it.
            None if !found.taken && found.expires_at_ms <= now_ms() => LoginState::Failed {
                message: "the login expired before the browser came back".into(),
            },
            None => LoginState::Pending,
        })
    }

    /// A server's `/oauth/callback`: exchanges the code with `oauth` (the
    /// server's client), lists an MCP server's tools with the new token,
    /// and records the outcome for whoever started the login. Err is the
    /// page's message.
    pub async fn finish_login(
        &self,
        oauth: &OAuth,
        http: &HttpClient,
        callback: CallbackParams<'_>,
    ) -> Result<LoginFinished, String> {
        let finished = oauth
            .finish_login(callback.code, callback.state, callback.iss, callback.error)
            .await
            .map_err(|e| e.to_string())?;
        let note = self
            .after_login(&finished.org_id, &finished.namespace, http)
            .await
            .err();
        oauth
            .settle_login(callback.state.unwrap_or_default(), Ok(()), note.clone())
            .await;
        Ok(LoginFinished {
            namespace: finished.namespace,
            note,
        })
    }

    /// The OAuth connection's grant, described for a person
    /// (`ready  scopes=…  expires_in=…s`).
    pub async fn describe_grant(&self, actor: &Actor, namespace: &str) -> OpResult<String> {
        let record = self
            .store()
            .get_connection(&actor.org_id, namespace)
            .await?
            .filter(|c| c.kind == CredentialKind::OAuth)
            .ok_or_else(|| OpError::not_found(format_args!("OAuth connection of {namespace:?}")))?;
        let grant = Grant::from_record(&record).map_err(login_error)?;
        Ok(grant.describe(now_ms()))
    }

    /// After a login: an MCP server's tools, listed with the new token (they
    /// were unknown while it needed a login). Err says why not, for a note.
    async fn after_login(
        &self,
        org_id: &str,
        namespace: &str,
        http: &HttpClient,
    ) -> Result<(), String> {
        let records = self
            .store()
            .list_integrations(org_id, true)
            .await
            .map_err(|e| e.to_string())?;
        let Some(record) = records.into_iter().find(|r| r.namespace == namespace) else {
            return Ok(());
        };
        if record.integration_kind() != Ok(IntegrationKind::Mcp) {
            return Ok(());
        }
        let endpoint = executor_upstream::load(&record.document)?.endpoint;
        self.sync_mcp(org_id, namespace, &endpoint, http)
            .await
            .map(|_| ())
            .map_err(|e| format!("its tools could not be listed: {e}"))
    }

    /// An OAuth client over `http`, sealing with this process's key.
    fn login_oauth(&self, http: HttpClient) -> OpResult<OAuth> {
        let key = self.parts.key.clone().ok_or_else(|| {
            OpError::unavailable("logins cannot be stored here: the secret key is not loaded")
        })?;
        let store: Arc<dyn ConnectionStore> = self.parts.store.clone();
        Ok(OAuth::new(store, key, http))
    }
}

/// The query of an authorization response at `/oauth/callback`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallbackParams<'a> {
    pub code: Option<&'a str>,
    pub state: Option<&'a str>,
    pub iss: Option<&'a str>,
    pub error: Option<&'a str>,
}

/// Each OAuth failure as the operation's error: what the operator gave or
/// must give is the input's fault; a server that refused or cannot be
/// reached is the upstream's.
fn login_error(error: OAuthError) -> OpError {
    match error {
        OAuthError::Setup(message) => OpError::conflict("login_not_possible", message),
        OAuthError::Stored(message) => OpError::internal("cannot read or write the login", message),
        other => OpError::upstream(other.to_string()),
    }
}

/// What a login is for, from the integration's stored record.
fn login_target(org_id: &str, record: &IntegrationRecord) -> OpResult<LoginTarget> {
    let namespace = &record.namespace;
    let not_possible = |why: String| OpError::conflict("login_not_possible", why);
    let resource = match record.integration_kind() {
        Ok(IntegrationKind::Mcp) => {
            let (url, challenge) = executor_upstream::login_resource(&record.document)
                .map_err(|e| not_possible(format!("{namespace} cannot be logged in to: {e}")))?
                .ok_or_else(|| {
                    not_possible(format!(
                        "{namespace} is a stdio MCP server: it has no login"
                    ))
                })?;
            Resource::Mcp {
                url,
                challenge: challenge.as_deref().and_then(Challenge::parse),
            }
        }
        Ok(IntegrationKind::OpenApi) => {
            let stored = executor_openapi::load(&record.document)
                .map_err(|e| not_possible(format!("{namespace} cannot be logged in to: {e}")))?;
            let url = record.base_url.clone().ok_or_else(|| {
                not_possible(format!(
                    "{namespace} has no base URL: set one (integrations update) first"
                ))
            })?;
            Resource::Api {
                url,
                declared: declared_oauth(&stored.auth_methods),
                probe_body: None,
            }
        }
        Ok(IntegrationKind::Graphql) => Resource::Api {
            url: record
                .base_url
                .clone()
                .ok_or_else(|| not_possible(format!("{namespace} has no endpoint")))?,
            declared: Declared::default(),
            probe_body: Some(r#"{"query":"{ __typename }"}"#.into()),
        },
        Err(e) => {
            return Err(not_possible(format!(
                "{namespace} cannot be logged in to: {e}"
            )));
        }
    };
    Ok(LoginTarget {
        org_id: org_id.to_string(),
        namespace: namespace.to_string(),
        resource,
    })
}

/// What an OpenAPI document's first OAuth scheme declares.
fn declared_oauth(methods: &[executor_openapi::AuthMethod]) -> Declared {
    let Some(executor_openapi::AuthMethod::OAuth2 {
        flows,
        openid_connect_url,
        required_scopes,
        ..
    }) = methods
        .iter()
        .find(|m| matches!(m, executor_openapi::AuthMethod::OAuth2 { .. }))
    else {
        return Declared::default();
    };
    let flows = flows.clone().unwrap_or_default();
    let code = flows.authorization_code.unwrap_or_default();
    Declared {
        authorization_url: code.authorization_url,
        token_url: code.token_url,
        client_credentials_token_url: flows.client_credentials.and_then(|f| f.token_url),
        openid_connect_url: openid_connect_url.clone(),
        scopes: required_scopes.clone(),
    }
}
