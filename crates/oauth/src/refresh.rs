//! The access token of a connection at call time: refreshed shortly before
//! it lapses, once for every caller at once — in this process through one
//! lock per connection, across processes on one store through a lease on
//! the row — and saved before it is used, so a rotated refresh token is
//! never lost to a crash after its first use.

use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_catalog::ToolError;
use executor_store::secrets::SecretString;
use executor_store::{ConnectionRecord, CredentialKind, now_ms};

use crate::challenge::Challenge;
use crate::error::{OAuthError, reauth_required, token_unavailable};
use crate::grant::{Flow, Grant, GrantStatus, Secrets};
use crate::oauth::{Flight, OAuth};
use crate::token::{Issued, TokenGrant, request_token};

/// How long a refresher holds the row; longer than a token request may take
/// (15 s), so a live holder never loses it to a second refresher (which,
/// with rotation, would spend the refresh token twice).
const LEASE: Duration = Duration::from_secs(30);
/// How often a caller waiting for another process's refresh looks again.
const LEASE_POLL: Duration = Duration::from_millis(50);
/// How long a save of new tokens is retried before the call gives up.
const SAVE_RETRY: Duration = Duration::from_secs(5);

/// The row a refresher leased, and the name of its lease.
struct Leased {
    record: ConnectionRecord,
    lease: String,
}

/// Authorization server refusals that only a new login can mend.
fn needs_person(error: &str) -> bool {
    matches!(
        error,
        "invalid_grant" | "invalid_client" | "unauthorized_client"
    )
}

impl OAuth {
    /// The access token of an `oauth` connection, refreshed first when due.
    pub async fn access_token(&self, record: &ConnectionRecord) -> Result<SecretString, ToolError> {
        let namespace = &record.namespace;
        let grant = Grant::from_record(record).map_err(|e| token_unavailable(namespace, &e))?;
        if let GrantStatus::ReauthRequired { reason } = &grant.status {
            return Err(reauth_required(namespace, reason));
        }
        if grant.is_fresh(now_ms()) {
            return self.open(record).map(|s| s.access_token);
        }
        self.refresh(&record.org_id, namespace, record.generation, false)
            .await
    }

    /// The upstream refused a call made with `rejected`: Some(token) to
    /// retry once with, None when retrying cannot help (not an OAuth
    /// refusal), or the error the call answers.
    pub async fn refused(
        &self,
        org_id: &str,
        namespace: &str,
        rejected: &SecretString,
        status: u16,
        www_authenticate: Option<&str>,
    ) -> Result<Option<SecretString>, ToolError> {
        let record = self.read(org_id, namespace).await?;
        let mut grant =
            Grant::from_record(&record).map_err(|e| token_unavailable(namespace, &e))?;
        if let GrantStatus::ReauthRequired { reason } = &grant.status {
            return Err(reauth_required(namespace, reason));
        }
        let challenge = www_authenticate.and_then(Challenge::parse);
        if status == 403 {
            let Some(challenge) = challenge.filter(Challenge::is_insufficient_scope) else {
                return Ok(None);
            };
            if grant.flow == Flow::ClientCredentials {
                return self
                    .widen(record, grant, challenge.scopes())
                    .await
                    .map(Some);
            }
            return Err(self.step_up(record, &mut grant, challenge.scopes()).await);
        }
        if status == 401 {
            // Another caller renewed the token since this one was read.
            let current = self.open(&record)?.access_token;
            if current.expose() != rejected.expose() {
                return Ok(Some(current));
            }
            return self
                .refresh(org_id, namespace, record.generation, true)
                .await
                .map(Some);
        }
        Ok(None)
    }

    /// A 403 `insufficient_scope`: scopes the grant lacks are remembered
    /// for the next login (which a person must make: RFC 6749 §6 forbids a
    /// refresh to widen a grant) and this call answers
    /// `oauth_reauth_required`, while calls the grant covers go on; scopes
    /// it holds mean the server refuses anyway, and asking again would loop.
    async fn step_up(
        &self,
        record: ConnectionRecord,
        grant: &mut Grant,
        wanted: Vec<String>,
    ) -> ToolError {
        let namespace = record.namespace.clone();
        let missing: Vec<String> = wanted
            .iter()
            .filter(|s| !grant.scopes_granted.contains(s))
            .cloned()
            .collect();
        if missing.is_empty() {
            return ToolError::new(
                "connection_rejected",
                format!(
                    "{namespace} refused the call for want of a scope{}, though the grant holds it",
                    if wanted.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", wanted.join(" "))
                    }
                ),
            );
        }
        for scope in &wanted {
            if !grant.scopes_required.contains(scope) {
                grant.scopes_required.push(scope.clone());
            }
        }
        // The grant stays usable for the calls its scopes cover; this one
        // needs a person, and the next login asks for the scope.
        let reason = format!("{namespace} asks for the scope `{}`", missing.join(" "));
        if let Err(e) = self.save_grant_only(&record, None, grant).await {
            return token_unavailable(&namespace, &e);
        }
        reauth_required(&namespace, &reason)
    }

    /// A 403 `insufficient_scope` on a client-credentials grant: no person
    /// is needed to ask for more, so a new token is asked with the scopes
    /// added (once; the call retries once).
    async fn widen(
        &self,
        record: ConnectionRecord,
        mut grant: Grant,
        wanted: Vec<String>,
    ) -> Result<SecretString, ToolError> {
        let namespace = record.namespace.clone();
        if wanted.iter().all(|s| grant.scopes_granted.contains(s)) {
            return Err(ToolError::new(
                "connection_rejected",
                format!(
                    "{namespace} refused the call for want of a scope, though the grant holds it"
                ),
            ));
        }
        for scope in wanted {
            if !grant.scopes_required.contains(&scope) {
                grant.scopes_required.push(scope);
            }
        }
        self.save_grant_only(&record, None, &grant)
            .await
            .map_err(|e| token_unavailable(&namespace, &e))?;
        // The save moved the generation by one: refresh from there.
        self.refresh(&record.org_id, &namespace, record.generation + 1, true)
            .await
    }

    /// One refresh for every caller: under this process's lock for the
    /// connection, then under the row's lease.
    async fn refresh(
        &self,
        org_id: &str,
        namespace: &str,
        seen_generation: i64,
        force: bool,
    ) -> Result<SecretString, ToolError> {
        let flight = self.flight(org_id, namespace);
        let _turn = flight.lock().await;
        let deadline = Instant::now() + LEASE + LEASE_POLL * 20;
        loop {
            let record = self.read(org_id, namespace).await?;
            let grant =
                Grant::from_record(&record).map_err(|e| token_unavailable(namespace, &e))?;
            if let GrantStatus::ReauthRequired { reason } = &grant.status {
                return Err(reauth_required(namespace, reason));
            }
            // Another caller (here or in another process) refreshed since.
            if record.generation != seen_generation || (!force && grant.is_fresh(now_ms())) {
                return self.open(&record).map(|s| s.access_token);
            }
            let now = now_ms();
            let until = now + LEASE.as_millis() as i64;
            // Each lease taken has its own name: what this refresher does
            // as its holder is fenced by that lease, not by the process.
            let lease = format!("{}-{}", self.holder, executor_store::tokens::random_id(8));
            let leased = self
                .store
                .lease_connection(org_id, namespace, record.generation, &lease, until, now)
                .await
                .map_err(|e| token_unavailable(namespace, &OAuthError::Stored(e.to_string())))?;
            if leased {
                let leased = Leased { record, lease };
                return self.refresh_leased(leased, grant, force).await;
            }
            if Instant::now() >= deadline {
                return Err(token_unavailable(
                    namespace,
                    &OAuthError::Unreachable(
                        "another process is still refreshing the token".into(),
                    ),
                ));
            }
            tokio::time::sleep(LEASE_POLL).await;
        }
    }

    async fn refresh_leased(
        &self,
        leased: Leased,
        grant: Grant,
        force: bool,
    ) -> Result<SecretString, ToolError> {
        let namespace = leased.record.namespace.clone();
        let secrets = self.open(&leased.record)?;
        let unexpired = grant.expires_at_ms.is_none_or(|at| now_ms() < at);
        let requests_token = !matches!(
            (grant.flow, &secrets.refresh_token),
            (Flow::AuthorizationCode, None)
        );
        if requests_token && !self.still_leased(&leased).await? {
            // Stalled past the lease (another refresher may hold it now):
            // the refresh token is not spent from here.
            return self.after_lost_lease(&leased).await;
        }
        let answer = match (grant.flow, &secrets.refresh_token) {
            (Flow::ClientCredentials, _) => {
                let mut scopes = grant.scopes_granted.clone();
                for s in &grant.scopes_required {
                    if !scopes.contains(s) {
                        scopes.push(s.clone());
                    }
                }
                request_token(
                    &self.http,
                    &grant,
                    secrets.client_secret.as_ref(),
                    TokenGrant::ClientCredentials { scopes: &scopes },
                )
                .await
            }
            (Flow::AuthorizationCode, Some(refresh_token)) => {
                request_token(
                    &self.http,
                    &grant,
                    secrets.client_secret.as_ref(),
                    TokenGrant::Refresh { refresh_token },
                )
                .await
            }
            (Flow::AuthorizationCode, None) => {
                if unexpired && !force {
                    self.release(&leased).await;
                    return Ok(secrets.access_token);
                }
                let why = if force {
                    "the server rejected the access token and the grant has no refresh token"
                } else {
                    "the access token expired and the grant has no refresh token"
                };
                return Err(self.mark_reauth(&leased, grant, why).await);
            }
        };
        match answer {
            Ok(issued) => self.save_refreshed(&leased, grant, secrets, issued).await,
            Err(OAuthError::Refused { error, .. }) if needs_person(&error) => {
                let why = format!("the authorization server answered {error}");
                Err(self.mark_reauth(&leased, grant, &why).await)
            }
            Err(e) => {
                self.release(&leased).await;
                if unexpired && !force {
                    // The old token still works: use it, refresh next time.
                    tracing::warn!(namespace = %namespace, error = %e, "token refresh failed; the current token is still valid");
                    return Ok(secrets.access_token);
                }
                Err(token_unavailable(&namespace, &e))
            }
        }
    }

    /// Saves refreshed tokens (keeping the refresh token when the answer
    /// brings none) before anyone uses them.
    async fn save_refreshed(
        &self,
        leased: &Leased,
        mut grant: Grant,
        old: Secrets,
        issued: Issued,
    ) -> Result<SecretString, ToolError> {
        let record = &leased.record;
        let namespace = record.namespace.clone();
        let now = now_ms();
        grant.obtained_at_ms = now;
        grant.expires_at_ms = issued
            .expires_in_s
            .map(|s| now + (s as i64).saturating_mul(1000));
        if let Some(scopes) = issued.scopes {
            grant.scopes_granted = scopes;
        }
        let secrets = Secrets {
            access_token: issued.access_token,
            refresh_token: issued.refresh_token.or(old.refresh_token),
            client_secret: old.client_secret,
        };
        let sealed = secrets
            .seal(&self.key, &record.org_id, &namespace)
            .map_err(|e| token_unavailable(&namespace, &e))?;
        let updated = ConnectionRecord {
            secret: sealed,
            oauth: Some(grant.to_json()),
            updated_at_ms: now,
            ..record.clone()
        };
        let started = Instant::now();
        loop {
            match self
                .store
                .save_connection_if(updated.clone(), record.generation, Some(&leased.lease))
                .await
            {
                Ok(true) => return Ok(secrets.access_token),
                Ok(false) => {
                    // The lease lapsed and another refresher took it or
                    // saved first: its tokens win, ours are dropped unused.
                    tracing::warn!(namespace = %namespace, "a refresh outlived its lease; its tokens are not saved");
                    return self.after_lost_lease(leased).await;
                }
                Err(e) if started.elapsed() < SAVE_RETRY => {
                    tracing::warn!(namespace = %namespace, error = %e, "saving refreshed tokens failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => {
                    return Err(token_unavailable(
                        &namespace,
                        &OAuthError::Stored(e.to_string()),
                    ));
                }
            }
        }
    }

    /// Records that a person must log in again; the answer for the call.
    async fn mark_reauth(&self, leased: &Leased, mut grant: Grant, why: &str) -> ToolError {
        grant.status = GrantStatus::ReauthRequired {
            reason: why.to_string(),
        };
        if let Err(e) = self
            .save_grant_only(&leased.record, Some(&leased.lease), &grant)
            .await
        {
            return token_unavailable(&leased.record.namespace, &e);
        }
        reauth_required(&leased.record.namespace, why)
    }

    /// Writes the grant's state where the row is still at the generation
    /// read (a stale refresher never marks a newer grant).
    async fn save_grant_only(
        &self,
        record: &ConnectionRecord,
        lease: Option<&str>,
        grant: &Grant,
    ) -> Result<(), OAuthError> {
        let updated = ConnectionRecord {
            oauth: Some(grant.to_json()),
            updated_at_ms: now_ms(),
            ..record.clone()
        };
        self.store
            .save_connection_if(updated, record.generation, lease)
            .await
            .map(|_| ())
            .map_err(|e| OAuthError::Stored(e.to_string()))
    }

    async fn release(&self, leased: &Leased) {
        let record = &leased.record;
        let _ = self
            .store
            .release_connection_lease(&record.org_id, &record.namespace, &leased.lease)
            .await;
    }

    /// Whether the refresher still holds its lease, asked right before
    /// the token request that spends the refresh token.
    async fn still_leased(&self, leased: &Leased) -> Result<bool, ToolError> {
        let record = &leased.record;
        self.store
            .holds_connection_lease(
                &record.org_id,
                &record.namespace,
                record.generation,
                &leased.lease,
            )
            .await
            .map_err(|e| token_unavailable(&record.namespace, &OAuthError::Stored(e.to_string())))
    }

    /// A refresher that lost its lease uses the tokens another one saved
    /// since; when none has yet, the call fails rather than spend the
    /// refresh token a second time.
    async fn after_lost_lease(&self, leased: &Leased) -> Result<SecretString, ToolError> {
        let record = &leased.record;
        let current = self.read(&record.org_id, &record.namespace).await?;
        if current.generation != record.generation {
            return self.open(&current).map(|s| s.access_token);
        }
        Err(token_unavailable(
            &record.namespace,
            &OAuthError::Unreachable(
                "this refresh outlived its lease and another process is refreshing the token"
                    .into(),
            ),
        ))
    }

    async fn read(&self, org_id: &str, namespace: &str) -> Result<ConnectionRecord, ToolError> {
        let missing = || {
            ToolError::new(
                "connection_missing",
                format!(
                    "{namespace} has no OAuth connection; an operator can run `{}`",
                    crate::error::login_command(namespace)
                ),
            )
        };
        match self.store.get_connection(org_id, namespace).await {
            Ok(Some(record)) if record.kind == CredentialKind::OAuth => Ok(record),
            Ok(_) => Err(missing()),
            Err(e) => Err(token_unavailable(
                namespace,
                &OAuthError::Stored(e.to_string()),
            )),
        }
    }

    fn open(&self, record: &ConnectionRecord) -> Result<Secrets, ToolError> {
        Secrets::open(&self.key, &record.secret, &record.org_id, &record.namespace)
            .map_err(|e| token_unavailable(&record.namespace, &e))
    }

    fn flight(&self, org_id: &str, namespace: &str) -> Flight {
        let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
        // Entries nobody waits on are dropped as others are added.
        flights.retain(|_, lock| Arc::strong_count(lock) > 1);
        flights
            .entry((org_id.to_string(), namespace.to_string()))
            .or_default()
            .clone()
    }
}
