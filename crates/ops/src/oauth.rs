//! The built-in authorization server's records, for operators (SPEC §4,
//! §13): the org's grants (list, revoke), the server's clients (list,
//! pre-register, delete), and one-time console login links (SPEC §14).

use executor_store::{OAuthClientRecord, OAuthGrantRecord, Principal, now_ms};
use serde::Serialize;
use utoipa::ToSchema;

use executor_authz::{MAX_CLIENT_NAME_CHARS, MAX_REDIRECT_URIS};

use crate::{OpError, OpResult, Operations};

/// A grant as an operator sees it: never a token.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantInfo {
    pub id: String,
    pub client_id: String,
    /// As the client gave it (unverified).
    pub client_name: Option<String>,
    /// Where the client receives its codes.
    pub redirect_host: String,
    pub account_id: String,
    pub scope: String,
    pub created_at_ms: i64,
    pub last_used_at_ms: i64,
    pub expires_at_ms: i64,
    /// `active`, `revoked` or `lapsed`.
    pub state: String,
}

/// A registered client: never its secret.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub id: String,
    pub client_name: Option<String>,
    /// `registered` (dynamic registration), `preregistered` or
    /// `metadata_document` (its id is the URL of a client ID metadata document).
    pub origin: String,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub auth_method: String,
    pub redirect_uris: Vec<String>,
    pub created_at_ms: i64,
    pub last_used_at_ms: Option<i64>,
}

/// A pre-registered client: its secret is shown this once.
#[derive(Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientAdded {
    pub client: ClientInfo,
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for ClientAdded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAdded")
            .field("client", &self.client)
            .finish()
    }
}

fn client_info(record: OAuthClientRecord) -> ClientInfo {
    ClientInfo {
        id: record.id,
        client_name: record.client_name,
        origin: record.origin.as_str().to_string(),
        auth_method: record.auth_method,
        redirect_uris: record.redirect_uris,
        created_at_ms: record.created_at_ms,
        last_used_at_ms: record.last_used_at_ms,
    }
}

fn grant_info(grant: OAuthGrantRecord, client: Option<&OAuthClientRecord>, now: i64) -> GrantInfo {
    let state = if grant.revoked_at_ms.is_some() {
        "revoked"
    } else if grant.expires_at_ms <= now {
        "lapsed"
    } else {
        "active"
    };
    let redirect_host = url::Url::parse(&grant.redirect_uri)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| grant.redirect_uri.clone());
    GrantInfo {
        id: grant.id,
        client_id: grant.client_id,
        client_name: client.and_then(|c| c.client_name.clone()),
        redirect_host,
        account_id: grant.principal.account_id,
        scope: grant.scope,
        created_at_ms: grant.created_at_ms,
        last_used_at_ms: grant.last_used_at_ms,
        expires_at_ms: grant.expires_at_ms,
        state: state.to_string(),
    }
}

impl Operations {
    /// The org's grants, newest first.
    pub async fn list_grants(&self, actor: &Principal) -> OpResult<Vec<GrantInfo>> {
        let grants = self.store().list_oauth_grants(&actor.org_id).await?;
        let clients = self.store().list_oauth_clients().await?;
        let now = now_ms();
        Ok(grants
            .into_iter()
            .map(|g| {
                let client = clients.iter().find(|c| c.id == g.client_id);
                grant_info(g, client, now)
            })
            .collect())
    }

    /// Revokes a grant and its tokens, at once on every node; `org_id`
    /// limits it to one org (the API), none is the operator at the shell.
    pub async fn revoke_grant(&self, org_id: Option<&str>, id: &str) -> OpResult<()> {
        let found = self.store().find_oauth_grant(id).await?;
        if found.is_none_or(|g| org_id.is_some_and(|org| g.principal.org_id != org)) {
            return Err(OpError::not_found(format_args!("grant {id}")));
        }
        self.store().revoke_oauth_grant(id, now_ms()).await?;
        Ok(())
    }

    /// The server's clients, newest first.
    pub async fn list_clients(&self) -> OpResult<Vec<ClientInfo>> {
        Ok(self
            .store()
            .list_oauth_clients()
            .await?
            .into_iter()
            .map(client_info)
            .collect())
    }

    /// Pre-registers a client (`executor oauth clients add`).
    pub async fn add_client(
        &self,
        name: &str,
        redirect_uris: &[String],
        with_secret: bool,
    ) -> OpResult<ClientAdded> {
        // Control characters are dropped, as a registration's name's are.
        let name: String = name.chars().filter(|c| !c.is_control()).collect();
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_CLIENT_NAME_CHARS {
            return Err(OpError::invalid(
                "name",
                format!("a client needs a name of 1 to {MAX_CLIENT_NAME_CHARS} characters"),
            ));
        }
        if redirect_uris.is_empty() || redirect_uris.len() > MAX_REDIRECT_URIS {
            return Err(OpError::invalid(
                "redirect_uris",
                format!("a client needs 1 to {MAX_REDIRECT_URIS} redirect URIs"),
            ));
        }
        let (record, secret) =
            executor_authz::preregistered_client(name, redirect_uris, with_secret, now_ms())
                .map_err(|e| OpError::invalid("redirect_uris", e.to_string()))?;
        self.store().insert_oauth_client(record.clone()).await?;
        Ok(ClientAdded {
            client: client_info(record),
            client_secret: secret,
        })
    }

    /// Deletes a client; its grants are revoked.
    pub async fn delete_client(&self, id: &str) -> OpResult<()> {
        if self.store().delete_oauth_client(id, now_ms()).await? {
            Ok(())
        } else {
            Err(OpError::not_found(format_args!("client {id}")))
        }
    }

    /// A one-time console login link's secret for `actor` (10 minutes).
    pub async fn login_link(&self, actor: &Principal) -> OpResult<String> {
        Ok(executor_authz::mint_login_link(self.store(), actor.clone()).await?)
    }
}

/// Over the API, an org sees the clients it has granted (in any state)
/// and the pre-registered ones; clients are the server's, so deleting one
/// outright is the operator's, at the shell (`executor oauth clients
/// delete`). An org "removes" a client by revoking its own grants of it.
impl Operations {
    /// The clients the org sees, newest first.
    pub async fn list_org_clients(&self, actor: &Principal) -> OpResult<Vec<ClientInfo>> {
        let granted: Vec<String> = self
            .store()
            .list_oauth_grants(&actor.org_id)
            .await?
            .into_iter()
            .map(|g| g.client_id)
            .collect();
        Ok(self
            .store()
            .list_oauth_clients()
            .await?
            .into_iter()
            .filter(|c| {
                c.origin == executor_store::OAuthClientOrigin::Preregistered
                    || granted.contains(&c.id)
            })
            .map(client_info)
            .collect())
    }

    /// One client the org sees.
    pub async fn get_org_client(&self, actor: &Principal, id: &str) -> OpResult<ClientInfo> {
        self.list_org_clients(actor)
            .await?
            .into_iter()
            .find(|c| c.id == id)
            .ok_or_else(|| OpError::not_found(format_args!("client {id}")))
    }

    /// Revokes every grant the org gave the client; the client stays
    /// registered (other orgs may use it).
    pub async fn revoke_client_in_org(&self, actor: &Principal, id: &str) -> OpResult<()> {
        self.get_org_client(actor, id).await?;
        let now = now_ms();
        for grant in self.store().list_oauth_grants(&actor.org_id).await? {
            if grant.client_id == id && grant.revoked_at_ms.is_none() {
                self.store().revoke_oauth_grant(&grant.id, now).await?;
            }
        }
        Ok(())
    }
}
