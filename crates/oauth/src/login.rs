//! A login: discovery, the client's identity, the authorization URL with
//! PKCE and `state` (kept in a pending row, so that whichever process
//! serves the callback completes it), and the code exchange.

use executor_store::secrets::SecretString;
use executor_store::{ConnectionRecord, CredentialKind, PendingLoginRecord, now_ms};
use oauth2::basic::BasicClient;
use oauth2::{AuthUrl, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, Scope};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use url::Url;
use zeroize::Zeroizing;

use crate::challenge::Challenge;
use crate::discovery::{self, Declared, Discovered};
use crate::error::OAuthError;
use crate::grant::{AuthMethod, ClientSource, Flow, Grant, GrantStatus, Secrets};
use crate::metadata::ServerMetadata;
use crate::oauth::OAuth;
use crate::token::{Issued, TokenGrant, request_token};

/// How long a started login waits for its callback.
pub const LOGIN_TIMEOUT_MS: i64 = 10 * 60 * 1000;

/// What is being logged in to, as its integration kind describes it.
#[derive(Debug, Clone)]
pub enum Resource {
    /// An MCP server (MCP authorization): discovery from its URL and the
    /// challenge it answered.
    Mcp {
        url: String,
        challenge: Option<Challenge>,
    },
    /// An HTTP API (OpenAPI, GraphQL) at `url`: its declared flows, else
    /// what it answers without a token (a Bearer challenge naming its
    /// resource metadata), else `--issuer`.
    Api {
        url: String,
        declared: Declared,
        /// How to ask the API for its challenge: POST this JSON (GraphQL),
        /// else GET the URL.
        probe_body: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct LoginTarget {
    pub org_id: String,
    pub namespace: String,
    pub resource: Resource,
}

/// The operator's choices (`executor connections login` flags).
#[derive(Default)]
pub struct LoginOptions {
    pub client_id: Option<String>,
    pub client_secret: Option<SecretString>,
    /// Overrides the scopes discovery would choose.
    pub scopes: Vec<String>,
    /// None: client credentials when it is the only grant offered.
    pub flow: Option<Flow>,
    /// `<public-url>/oauth/callback`.
    pub redirect_uri: String,
    /// The URL of our client ID metadata document, when one is published.
    pub client_metadata_url: Option<String>,
    /// `--issuer`: the authorization server, when nothing says which.
    pub issuer: Option<String>,
    /// `--resource`: the RFC 8707 resource to ask tokens for (an API's
    /// resource metadata names it too).
    pub resource: Option<String>,
}

pub enum Started {
    /// A person must open `authorization_url`; the callback completes the
    /// login whose pending row `state_hash` names.
    Browser {
        authorization_url: String,
        state_hash: String,
    },
    /// No person needed (client credentials): the connection is saved.
    Done(Box<Grant>),
}

/// The login's non-secret half, in the pending row.
#[derive(Serialize, Deserialize)]
struct PendingRequest {
    redirect_uri: String,
    grant: Grant,
    requested_scopes: Vec<String>,
}

/// The login's secret half, sealed in the pending row.
#[derive(Serialize, Deserialize)]
struct PendingSecrets {
    verifier: String,
    #[serde(default)]
    client_secret: Option<String>,
}

/// A finished login.
pub struct Finished {
    pub org_id: String,
    pub namespace: String,
    pub grant: Grant,
}

pub fn state_hash(state: &str) -> String {
    hex(&Sha256::digest(state.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The client ID metadata document served at `metadata_url` (the draft
/// "OAuth Client ID Metadata Document"): a public client with our callback.
pub fn client_metadata_document(metadata_url: &str, redirect_uri: &str) -> serde_json::Value {
    json!({
        "client_id": metadata_url,
        "client_name": "Executor",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    })
}

impl OAuth {
    pub async fn start_login(
        &self,
        target: &LoginTarget,
        options: LoginOptions,
    ) -> Result<Started, OAuthError> {
        let previous = self.previous_grant(target).await;
        let remembered = previous
            .as_ref()
            .and_then(|g| g.resource_metadata_url.clone());
        let (mut discovered, challenge) = match &target.resource {
            Resource::Mcp { url, challenge } => {
                let url = Url::parse(url)
                    .map_err(|_| OAuthError::Setup(format!("{url} is not a URL")))?;
                let found = match &options.issuer {
                    Some(issuer) => Discovered {
                        server: discovery::discover_issuer(&self.http, issuer).await?,
                        resource: Some(discovery::canonical_resource(&url)),
                        resource_metadata_url: None,
                        resource_scopes: None,
                        preferred_flow: None,
                    },
                    None => {
                        discovery::discover_mcp(
                            &self.http,
                            &url,
                            challenge.as_ref(),
                            remembered.as_deref(),
                        )
                        .await?
                    }
                };
                (found, challenge.clone())
            }
            Resource::Api {
                url,
                declared,
                probe_body,
            } => {
                let url = Url::parse(url)
                    .map_err(|_| OAuthError::Setup(format!("{url} is not a URL")))?;
                let challenge = self.http.probe(url.as_str(), probe_body.as_deref()).await;
                let found = discovery::discover_api(
                    &self.http,
                    &url,
                    declared,
                    challenge.as_ref(),
                    options.issuer.as_deref(),
                )
                .await?;
                (found, challenge)
            }
        };
        if let Some(resource) = &options.resource {
            discovered.resource = Some(resource.clone());
        }
        let declared_scopes = match &target.resource {
            Resource::Api { declared, .. } => declared.scopes.clone(),
            Resource::Mcp { .. } => Vec::new(),
        };
        let flow = options.flow.or(discovered.preferred_flow).unwrap_or(
            if discovered.server.offers_grant("client_credentials")
                && !discovered.server.offers_grant("authorization_code")
            {
                Flow::ClientCredentials
            } else {
                Flow::AuthorizationCode
            },
        );
        let scopes = choose_scopes(
            &options,
            challenge.as_ref(),
            &declared_scopes,
            &discovered,
            previous.as_ref(),
            flow,
        );
        let (client_id, client_source, auth_method, client_secret) =
            self.identify(&discovered, &options, flow).await?;
        let grant = Grant {
            flow,
            status: GrantStatus::Ready,
            server: discovered.server.clone(),
            client_id,
            client_source,
            auth_method,
            resource: discovered.resource.clone(),
            resource_metadata_url: discovered.resource_metadata_url.clone(),
            scopes_granted: Vec::new(),
            scopes_required: previous.map(|g| g.scopes_required).unwrap_or_default(),
            expires_at_ms: None,
            obtained_at_ms: now_ms(),
        };
        match flow {
            Flow::ClientCredentials => {
                let issued = request_token(
                    &self.http,
                    &grant,
                    client_secret.as_ref(),
                    TokenGrant::ClientCredentials { scopes: &scopes },
                )
                .await?;
                let grant = self
                    .save_new_grant(
                        &target.org_id,
                        &target.namespace,
                        grant,
                        issued,
                        &scopes,
                        client_secret,
                    )
                    .await?;
                Ok(Started::Done(Box::new(grant)))
            }
            Flow::AuthorizationCode => {
                self.authorization_url(target, grant, scopes, &options.redirect_uri, client_secret)
                    .await
            }
        }
    }

    async fn previous_grant(&self, target: &LoginTarget) -> Option<Grant> {
        let record = self
            .store
            .get_connection(&target.org_id, &target.namespace)
            .await
            .ok()??;
        (record.kind == CredentialKind::OAuth)
            .then(|| Grant::from_record(&record).ok())
            .flatten()
    }

    /// Who we are to this server: `--client-id`, our metadata document, or
    /// a registration made now.
    async fn identify(
        &self,
        discovered: &Discovered,
        options: &LoginOptions,
        flow: Flow,
    ) -> Result<(String, ClientSource, AuthMethod, Option<SecretString>), OAuthError> {
        let server = &discovered.server;
        if let Some(id) = &options.client_id {
            let secret = options
                .client_secret
                .as_ref()
                .map(|s| SecretString::from(s.expose().to_string()));
            let method = match &secret {
                None => AuthMethod::None,
                Some(_) if server.supports_auth_method("client_secret_basic") => {
                    AuthMethod::ClientSecretBasic
                }
                Some(_) if server.supports_auth_method("client_secret_post") => {
                    AuthMethod::ClientSecretPost
                }
                Some(_) => AuthMethod::ClientSecretBasic,
            };
            return Ok((id.clone(), ClientSource::Preregistered, method, secret));
        }
        if flow == Flow::ClientCredentials {
            return Err(OAuthError::Setup(
                "client credentials need the client's id and secret: pass --client-id and --client-secret-stdin"
                    .into(),
            ));
        }
        if server.client_id_metadata_document_supported
            && let Some(url) = &options.client_metadata_url
        {
            return Ok((
                url.clone(),
                ClientSource::MetadataDocument,
                AuthMethod::None,
                None,
            ));
        }
        if let Some(endpoint) = &server.registration_endpoint {
            return self.register(endpoint, server, &options.redirect_uri).await;
        }
        Err(OAuthError::Setup(
            "the authorization server offers no dynamic registration: register a client there and pass --client-id (and --client-secret-stdin)"
                .into(),
        ))
    }

    /// RFC 7591, anew at each login: a server that forgot an earlier
    /// registration never blocks a login.
    async fn register(
        &self,
        endpoint: &str,
        server: &ServerMetadata,
        redirect_uri: &str,
    ) -> Result<(String, ClientSource, AuthMethod, Option<SecretString>), OAuthError> {
        let asked = if server.supports_auth_method("none") {
            AuthMethod::None
        } else if server.supports_auth_method("client_secret_basic") {
            AuthMethod::ClientSecretBasic
        } else if server.supports_auth_method("client_secret_post") {
            AuthMethod::ClientSecretPost
        } else {
            AuthMethod::None
        };
        let native = Url::parse(redirect_uri)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| matches!(h, "127.0.0.1" | "localhost" | "[::1]"))
            })
            .unwrap_or(false);
        let request = json!({
            "client_name": "Executor",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": asked.as_str(),
            "application_type": if native { "native" } else { "web" },
        });
        let (status, body) = self.http.post_json(endpoint, &request).await?;
        #[derive(Deserialize)]
        struct Registered {
            client_id: String,
            #[serde(default)]
            client_secret: Option<String>,
            #[serde(default)]
            token_endpoint_auth_method: Option<String>,
        }
        if !(200..300).contains(&status) {
            let error = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_else(|| format!("HTTP {status}"));
            return Err(OAuthError::Refused {
                error,
                description: Some("dynamic client registration".into()),
            });
        }
        let registered: Registered = serde_json::from_slice(&body).map_err(|_| {
            OAuthError::Unreachable("the registration endpoint's answer is not a client".into())
        })?;
        let secret = registered.client_secret.map(SecretString::from);
        let method = registered
            .token_endpoint_auth_method
            .as_deref()
            .and_then(AuthMethod::parse)
            .unwrap_or(if secret.is_some() {
                asked
            } else {
                AuthMethod::None
            });
        Ok((registered.client_id, ClientSource::Dynamic, method, secret))
    }

    async fn authorization_url(
        &self,
        target: &LoginTarget,
        grant: Grant,
        scopes: Vec<String>,
        redirect_uri: &str,
        client_secret: Option<SecretString>,
    ) -> Result<Started, OAuthError> {
        if let Some(methods) = &grant.server.code_challenge_methods_supported
            && !methods.iter().any(|m| m == "S256")
        {
            return Err(OAuthError::Discovery(
                "the authorization server does not support PKCE with S256".into(),
            ));
        }
        let endpoint = grant.server.authorization_endpoint.clone().ok_or_else(|| {
            OAuthError::Discovery("the authorization server has no authorization endpoint".into())
        })?;
        let client = BasicClient::new(ClientId::new(grant.client_id.clone()))
            .set_auth_uri(AuthUrl::new(endpoint.clone()).map_err(|_| {
                OAuthError::Discovery(format!(
                    "the authorization endpoint {endpoint} is not a URL"
                ))
            })?)
            .set_redirect_uri(
                RedirectUrl::new(redirect_uri.to_string())
                    .map_err(|_| OAuthError::Setup(format!("{redirect_uri} is not a URL")))?,
            );
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(challenge)
            .add_scopes(scopes.iter().cloned().map(Scope::new));
        if let Some(resource) = &grant.resource {
            request = request.add_extra_param("resource", resource.clone());
        }
        let (url, state) = request.url();
        let state_hash = state_hash(state.secret());
        let secrets = Zeroizing::new(
            serde_json::to_string(&PendingSecrets {
                verifier: verifier.secret().clone(),
                client_secret: client_secret.as_ref().map(|s| s.expose().to_string()),
            })
            .unwrap_or_default(),
        );
        let sealed = executor_store::secrets::seal(
            &self.key,
            &secrets,
            &pending_aad(&target.org_id, &target.namespace, &state_hash),
        )
        .map_err(|e| OAuthError::Stored(format!("cannot seal the login: {e}")))?;
        let request = PendingRequest {
            redirect_uri: redirect_uri.to_string(),
            grant,
            requested_scopes: scopes,
        };
        let now = now_ms();
        self.store
            .insert_pending_login(PendingLoginRecord {
                state_hash: state_hash.clone(),
                org_id: target.org_id.clone(),
                namespace: target.namespace.clone(),
                sealed,
                request: serde_json::to_string(&request).unwrap_or_default(),
                created_at_ms: now,
                expires_at_ms: now + LOGIN_TIMEOUT_MS,
            })
            .await
            .map_err(|e| OAuthError::Stored(format!("cannot store the login: {e}")))?;
        Ok(Started::Browser {
            authorization_url: url.to_string(),
            state_hash,
        })
    }

    /// Completes the login `state` names with the authorization response:
    /// the tokens are saved as the connection. The caller then records the
    /// outcome with [`OAuth::settle_login`] (after what it does next, such
    /// as listing an MCP server's tools), for the process that started it.
    pub async fn finish_login(
        &self,
        code: Option<&str>,
        state: Option<&str>,
        iss: Option<&str>,
        error: Option<&str>,
    ) -> Result<Finished, OAuthError> {
        let state =
            state.ok_or_else(|| OAuthError::Setup("the callback carries no state".into()))?;
        let hash = state_hash(state);
        let pending = self
            .store
            .take_pending_login(&hash, now_ms())
            .await
            .map_err(|e| OAuthError::Stored(format!("cannot read the login: {e}")))?
            .ok_or_else(|| {
                OAuthError::Setup("this login is unknown, expired or already completed".into())
            })?;
        let outcome = self.complete(&pending, code, iss, error).await;
        if let Err(e) = &outcome {
            self.settle_login(state, Err(e.to_string()), None).await;
        }
        outcome
    }

    /// Records how the login `state` names ended; `note` is shown by the
    /// process that started it (a login that worked, with a caveat).
    pub async fn settle_login(
        &self,
        state: &str,
        outcome: Result<(), String>,
        note: Option<String>,
    ) {
        let settled = match outcome {
            Ok(()) => json!({"ok": true, "note": note}),
            Err(e) => json!({"error": e}),
        };
        let _ = self
            .store
            .settle_pending_login(&state_hash(state), settled.to_string())
            .await;
    }

    async fn complete(
        &self,
        pending: &PendingLoginRecord,
        code: Option<&str>,
        iss: Option<&str>,
        error: Option<&str>,
    ) -> Result<Finished, OAuthError> {
        if let Some(error) = error {
            return Err(OAuthError::Refused {
                error: error.chars().take(100).collect(),
                description: Some("at authorization".into()),
            });
        }
        let code = code.ok_or_else(|| OAuthError::Setup("the callback carries no code".into()))?;
        let request: PendingRequest = serde_json::from_str(&pending.request)
            .map_err(|_| OAuthError::Stored("the stored login is unreadable".into()))?;
        let server = &request.grant.server;
        // RFC 9207: the response names its issuer where the server says it
        // will, and a named issuer must be ours (mix-up defence), compared
        // as plain strings: no trailing slash, case or port folded away
        // (RFC 9207 §2.4; MCP 2026-07-28).
        match (iss, server.issuer.as_deref()) {
            (Some(iss), Some(issuer)) if iss != issuer => {
                return Err(OAuthError::Discovery(
                    "the authorization response names another issuer".into(),
                ));
            }
            (None, Some(_)) if server.authorization_response_iss_parameter_supported => {
                return Err(OAuthError::Discovery(
                    "the authorization response names no issuer, though its server promises one"
                        .into(),
                ));
            }
            _ => {}
        }
        let plain = executor_store::secrets::open(
            &self.key,
            &pending.sealed,
            &pending_aad(&pending.org_id, &pending.namespace, &pending.state_hash),
        )
        .map_err(|e| OAuthError::Stored(format!("cannot open the login: {e}")))?;
        let secrets: PendingSecrets = serde_json::from_str(plain.expose())
            .map_err(|_| OAuthError::Stored("the stored login is unreadable".into()))?;
        let client_secret = secrets.client_secret.map(SecretString::from);
        let verifier = Zeroizing::new(secrets.verifier);
        let issued = request_token(
            &self.http,
            &request.grant,
            client_secret.as_ref(),
            TokenGrant::Code {
                code,
                verifier: &verifier,
                redirect_uri: &request.redirect_uri,
            },
        )
        .await?;
        let grant = self
            .save_new_grant(
                &pending.org_id,
                &pending.namespace,
                request.grant,
                issued,
                &request.requested_scopes,
                client_secret,
            )
            .await?;
        Ok(Finished {
            org_id: pending.org_id.clone(),
            namespace: pending.namespace.clone(),
            grant,
        })
    }

    /// Writes a login's grant as the connection (replacing any credential).
    async fn save_new_grant(
        &self,
        org_id: &str,
        namespace: &str,
        mut grant: Grant,
        issued: Issued,
        requested: &[String],
        client_secret: Option<SecretString>,
    ) -> Result<Grant, OAuthError> {
        let now = now_ms();
        grant.obtained_at_ms = now;
        grant.expires_at_ms = issued
            .expires_in_s
            .map(|s| now + (s as i64).saturating_mul(1000));
        grant.scopes_granted = issued.scopes.unwrap_or_else(|| requested.to_vec());
        let secrets = Secrets {
            access_token: issued.access_token,
            refresh_token: issued.refresh_token,
            client_secret,
        };
        let sealed = secrets.seal(&self.key, org_id, namespace)?;
        self.store
            .set_connection(ConnectionRecord {
                org_id: org_id.to_string(),
                namespace: namespace.to_string(),
                kind: CredentialKind::OAuth,
                username: None,
                secret: sealed,
                updated_at_ms: now,
                oauth: Some(grant.to_json()),
                generation: 0,
            })
            .await
            .map_err(|e| OAuthError::Stored(format!("cannot save the connection: {e}")))?;
        Ok(grant)
    }

    /// How a login that `start_login` began has ended: None while waiting;
    /// Ok carries the completing process's note.
    pub async fn login_outcome(
        &self,
        state_hash: &str,
    ) -> Result<Option<Result<Option<String>, String>>, OAuthError> {
        let outcome = self
            .store
            .pending_login_outcome(state_hash)
            .await
            .map_err(|e| OAuthError::Stored(format!("cannot read the login: {e}")))?;
        Ok(match outcome {
            None => Some(Err("the login expired".into())),
            Some(None) => None,
            Some(Some(text)) => Some(read_login_outcome(&text)),
        })
    }
}

/// A settled login's outcome as [`OAuth::settle_login`] wrote it: Ok with
/// the completing process's note, or the error.
pub fn read_login_outcome(text: &str) -> Result<Option<String>, String> {
    let value: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    match value.get("error").and_then(|e| e.as_str()) {
        Some(error) => Err(error.to_string()),
        None => Ok(value
            .get("note")
            .and_then(|n| n.as_str())
            .map(str::to_string)),
    }
}

/// A pending login's seal is bound to its row.
fn pending_aad(org_id: &str, namespace: &str, state_hash: &str) -> String {
    format!("oauth-pending:{org_id}:{namespace}:{state_hash}")
}

/// `--scope` flags; else the challenge's scope; else the scopes an API
/// description's security requirements ask for; else the resource's
/// `scopes_supported`; else none (no `scope` parameter). Scopes a resource
/// asked for since (step-up) are added, and `offline_access` where the
/// server lists it, so that a refresh token comes with the grant.
fn choose_scopes(
    options: &LoginOptions,
    challenge: Option<&Challenge>,
    declared: &[String],
    discovered: &Discovered,
    previous: Option<&Grant>,
    flow: Flow,
) -> Vec<String> {
    let mut scopes: Vec<String> = if !options.scopes.is_empty() {
        options.scopes.clone()
    } else if let Some(c) = challenge.filter(|c| c.scope.is_some()) {
        c.scopes()
    } else if !declared.is_empty() {
        declared.to_vec()
    } else if let Some(supported) = &discovered.resource_scopes {
        supported.clone()
    } else {
        Vec::new()
    };
    if let Some(previous) = previous {
        for scope in previous
            .scopes_required
            .iter()
            .chain(&previous.scopes_granted)
        {
            if !scopes.contains(scope) && !previous.scopes_required.is_empty() {
                scopes.push(scope.clone());
            }
        }
    }
    let server = &discovered.server;
    let lists_offline = server
        .scopes_supported
        .as_ref()
        .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
    if flow == Flow::AuthorizationCode
        && !scopes.is_empty()
        && lists_offline
        && server.offers_grant("refresh_token")
        && !scopes.iter().any(|s| s == "offline_access")
    {
        scopes.push("offline_access".into());
    }
    scopes
}
