//! The built-in authorization server's state and browser sign-in on
//! Postgres: [`OAuthStore`], [`SignInStore`].
//!
//! What SQLite's single writer gives for free, row locks give here. A
//! method that reads, then writes, is one transaction that first locks the
//! row it decides on (`SELECT … FOR UPDATE`): a code, a refresh token.
//! Racing takers of one code, or refreshes of one token, wait for each
//! other and each then reads what the one before committed — one `Fresh`
//! take; every refresh within the grace issues. Every transaction locks in
//! one order — the code or refresh token, then the client, then the grant,
//! then tokens — so none waits in a circle. A revocation's statements on
//! `tokens` run after it holds the grant (or client), each with a snapshot
//! of its own (READ COMMITTED): a token issued under the grant by a
//! transaction it waited for is revoked with the rest, never left behind.
//! Every commit that touches `tokens` is followed by
//! [`PgStore::access_changed`], as `accounts.rs` does.

use async_trait::async_trait;
use deadpool_postgres::Transaction;
use tokio_postgres::Row;

use super::rows::*;
use super::{PgStore, col, db_error, pg_text};
use crate::columns::*;
use crate::oauth::{
    IDLE_CLIENT_KEPT_MS, LAPSED_KEPT_MS, Rotation, UNUSED_CLIENT_KEPT_MS, access_token,
    parse_origin, redirect_uris_from_json, redirect_uris_to_json, rotation,
};
use crate::*;

#[async_trait]
impl OAuthStore for PgStore {
    async fn insert_oauth_client(&self, c: OAuthClientRecord) -> StoreResult<()> {
        self.execute(
            &format!(
                "INSERT INTO oauth_clients ({OAUTH_CLIENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            ),
            &[
                &c.id,
                &c.secret_hash,
                &c.auth_method,
                // JSON escapes NUL: no pg_text needed.
                &redirect_uris_to_json(&c.redirect_uris),
                &c.client_name.as_deref().map(pg_text),
                &c.origin.as_str(),
                &c.created_at_ms,
                &c.last_used_at_ms,
            ],
        )
        .await?;
        Ok(())
    }

    async fn save_metadata_client(&self, c: OAuthClientRecord) -> StoreResult<bool> {
        let saved = self
            .execute(
                &format!(
                    "INSERT INTO oauth_clients ({OAUTH_CLIENT_COLUMNS}) \
                     VALUES ($1, NULL, 'none', $2, $3, 'metadata_document', $4, NULL) \
                     ON CONFLICT (id) DO UPDATE SET redirect_uris = excluded.redirect_uris, \
                     client_name = excluded.client_name \
                     WHERE oauth_clients.origin = 'metadata_document'"
                ),
                &[
                    &c.id,
                    &redirect_uris_to_json(&c.redirect_uris),
                    &c.client_name.as_deref().map(pg_text),
                    &c.created_at_ms,
                ],
            )
            .await?;
        Ok(saved > 0)
    }

    async fn find_oauth_client(&self, id: &str) -> StoreResult<Option<OAuthClientRecord>> {
        self.query_opt(
            &format!("SELECT {OAUTH_CLIENT_COLUMNS} FROM oauth_clients WHERE id = $1"),
            &[&id],
        )
        .await?
        .as_ref()
        .map(client_from_row)
        .transpose()
    }

    async fn list_oauth_clients(&self) -> StoreResult<Vec<OAuthClientRecord>> {
        let found = self
            .query(
                &format!(
                    "SELECT {OAUTH_CLIENT_COLUMNS} FROM oauth_clients \
                     ORDER BY created_at DESC, id COLLATE \"C\" DESC LIMIT $1"
                ),
                &[&(MAX_OAUTH_LISTED as i64)],
            )
            .await?;
        rows(found, client_from_row)
    }

    async fn delete_oauth_client(&self, id: &str, at_ms: i64) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // The client's row first: a racing exchange or refresh that holds
        // it is waited for, and its grant and token are revoked below; one
        // that comes after finds no client.
        let existed = tx
            .execute("DELETE FROM oauth_clients WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?
            > 0;
        revoke_client_grants(&tx, &[id.to_string()], at_ms).await?;
        tx.commit().await.map_err(db_error)?;
        self.access_changed();
        Ok(existed)
    }

    async fn insert_oauth_code(&self, c: OAuthCodeRecord) -> StoreResult<()> {
        self.execute(
            &format!(
                "INSERT INTO oauth_codes ({OAUTH_CODE_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
            ),
            &[
                &c.code_hash,
                &c.client_id,
                &pg_text(&c.redirect_uri),
                &pg_text(&c.code_challenge),
                &pg_text(&c.resource),
                &pg_text(&c.scope),
                &c.principal.account_id,
                &c.principal.org_id,
                &c.created_at_ms,
                &c.expires_at_ms,
            ],
        )
        .await?;
        Ok(())
    }

    async fn take_oauth_code(&self, code_hash: &[u8], at_ms: i64) -> StoreResult<CodeTake> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let found = tx
            .query_opt(
                &format!(
                    "SELECT {OAUTH_CODE_COLUMNS}, used_at, grant_id FROM oauth_codes \
                     WHERE code_hash = $1 FOR UPDATE"
                ),
                &[&code_hash],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = found else {
            return Ok(CodeTake::Unknown);
        };
        let code = code_from_row(&row)?;
        let used_at: Option<i64> = col(&row, 10)?;
        let grant_id: Option<String> = col(&row, 11)?;
        if used_at.is_some() {
            // A second presentation, in time or not: what the first issued
            // is revoked, and no grant is made of it later.
            tx.execute(
                "UPDATE oauth_codes SET replayed_at = COALESCE(replayed_at, $2) WHERE code_hash = $1",
                &[&code_hash, &at_ms],
            )
            .await
            .map_err(db_error)?;
            if let Some(grant_id) = &grant_id {
                revoke_grant(&tx, grant_id, at_ms).await?;
            }
            tx.commit().await.map_err(db_error)?;
            self.access_changed();
            return Ok(CodeTake::Replayed);
        }
        tx.execute(
            "UPDATE oauth_codes SET used_at = $2 WHERE code_hash = $1",
            &[&code_hash, &at_ms],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        if code.expires_at_ms <= at_ms {
            return Ok(CodeTake::Unknown);
        }
        Ok(CodeTake::Fresh(code))
    }

    async fn create_oauth_grant(
        &self,
        code_hash: &[u8],
        grant: OAuthGrantRecord,
        tokens: IssuedTokens,
    ) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // The code's row orders this against a replay: one that came first
        // is seen here; one that comes after sees the grant recorded below.
        let replayed = tx
            .query_opt(
                "SELECT replayed_at FROM oauth_codes WHERE code_hash = $1 FOR UPDATE",
                &[&code_hash],
            )
            .await
            .map_err(db_error)?;
        let fresh = match &replayed {
            Some(row) => col::<Option<i64>>(row, 0)?.is_none(),
            // Collected past its deadline: nothing to record the grant on.
            None => false,
        };
        if !fresh || !mark_client_used(&tx, &grant.client_id, tokens.issued_at_ms).await? {
            return Ok(false);
        }
        tx.execute(
            &format!(
                "INSERT INTO oauth_grants ({OAUTH_GRANT_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            ),
            &[
                &grant.id,
                &grant.client_id,
                &grant.principal.account_id,
                &grant.principal.org_id,
                &pg_text(&grant.scope),
                &pg_text(&grant.resource),
                &pg_text(&grant.redirect_uri),
                &grant.created_at_ms,
                &grant.last_used_at_ms,
                &grant.expires_at_ms,
                &grant.revoked_at_ms,
            ],
        )
        .await
        .map_err(db_error)?;
        issue(&tx, &grant, &tokens).await?;
        tx.execute(
            "UPDATE oauth_codes SET grant_id = $2 WHERE code_hash = $1",
            &[&code_hash, &grant.id],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }

    async fn refresh_oauth_grant(
        &self,
        refresh: RefreshUse,
        tokens: IssuedTokens,
    ) -> StoreResult<Result<OAuthGrantRecord, RefreshRefusal>> {
        let at = refresh.at_ms;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // Concurrent refreshes of one token queue here, each reading the
        // rotation the one before it committed.
        let found = tx
            .query_opt(
                "SELECT grant_id, expires_at, rotated_at FROM oauth_refresh_tokens \
                 WHERE token_hash = $1 FOR UPDATE",
                &[&refresh.token_hash],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = found else {
            return Ok(Err(RefreshRefusal::Invalid));
        };
        let (grant_id, expires_at, rotated_at): (String, i64, Option<i64>) =
            (col(&row, 0)?, col(&row, 1)?, col(&row, 2)?);
        if expires_at <= at {
            return Ok(Err(RefreshRefusal::Invalid));
        }
        // A grant's client never changes: read it unlocked, to lock the
        // client before the grant (the order every transaction here keeps).
        let owner = tx
            .query_opt(
                "SELECT client_id FROM oauth_grants WHERE id = $1",
                &[&grant_id],
            )
            .await
            .map_err(db_error)?;
        let Some(owner) = owner else {
            return Ok(Err(RefreshRefusal::Invalid));
        };
        let client_id: String = col(&owner, 0)?;
        // Another client's token is refused before it can revoke anything.
        if client_id != refresh.client_id {
            return Ok(Err(RefreshRefusal::Invalid));
        }
        let client_exists = tx
            .query_opt(
                "SELECT 1 FROM oauth_clients WHERE id = $1 FOR NO KEY UPDATE",
                &[&client_id],
            )
            .await
            .map_err(db_error)?
            .is_some();
        if !client_exists {
            return Ok(Err(RefreshRefusal::Invalid));
        }
        let grant = tx
            .query_opt(
                &format!("SELECT {OAUTH_GRANT_COLUMNS} FROM oauth_grants WHERE id = $1 FOR UPDATE"),
                &[&grant_id],
            )
            .await
            .map_err(db_error)?;
        let Some(grant) = grant else {
            return Ok(Err(RefreshRefusal::Invalid));
        };
        let mut grant = grant_from_row(&grant)?;
        if !grant.is_current(at) {
            return Ok(Err(RefreshRefusal::Invalid));
        }
        match rotation(rotated_at, at, refresh.grace_ms) {
            Rotation::First => {
                tx.execute(
                    "UPDATE oauth_refresh_tokens SET rotated_at = $2 WHERE token_hash = $1",
                    &[&refresh.token_hash, &at],
                )
                .await
                .map_err(db_error)?;
            }
            Rotation::WithinGrace => {}
            Rotation::Reused => {
                revoke_grant(&tx, &grant.id, at).await?;
                tx.commit().await.map_err(db_error)?;
                self.access_changed();
                return Ok(Err(RefreshRefusal::Reused));
            }
        }
        issue(&tx, &grant, &tokens).await?;
        tx.execute(
            "UPDATE oauth_grants SET last_used_at = GREATEST(last_used_at, $2) WHERE id = $1",
            &[&grant.id, &tokens.issued_at_ms],
        )
        .await
        .map_err(db_error)?;
        mark_client_used(&tx, &grant.client_id, tokens.issued_at_ms).await?;
        tx.commit().await.map_err(db_error)?;
        grant.last_used_at_ms = grant.last_used_at_ms.max(tokens.issued_at_ms);
        Ok(Ok(grant))
    }

    async fn grant_of_refresh_token(&self, token_hash: &[u8]) -> StoreResult<Option<String>> {
        match self
            .query_opt(
                "SELECT grant_id FROM oauth_refresh_tokens WHERE token_hash = $1",
                &[&token_hash],
            )
            .await?
        {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn find_oauth_grant(&self, id: &str) -> StoreResult<Option<OAuthGrantRecord>> {
        self.query_opt(
            &format!("SELECT {OAUTH_GRANT_COLUMNS} FROM oauth_grants WHERE id = $1"),
            &[&id],
        )
        .await?
        .as_ref()
        .map(grant_from_row)
        .transpose()
    }

    async fn list_oauth_grants(&self, org_id: &str) -> StoreResult<Vec<OAuthGrantRecord>> {
        let found = self
            .query(
                &format!(
                    "SELECT {OAUTH_GRANT_COLUMNS} FROM oauth_grants WHERE org_id = $1 \
                     ORDER BY created_at DESC, id COLLATE \"C\" DESC LIMIT $2"
                ),
                &[&org_id, &(MAX_OAUTH_LISTED as i64)],
            )
            .await?;
        rows(found, grant_from_row)
    }

    async fn revoke_oauth_grant(&self, id: &str, at_ms: i64) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let found = revoke_grant(&tx, id, at_ms).await?;
        tx.commit().await.map_err(db_error)?;
        self.access_changed();
        Ok(found)
    }

    async fn gc_oauth(&self, now_ms: i64) -> StoreResult<u64> {
        // Each step commits on its own: collection need not be atomic, and
        // short statements hold few locks. Only a client's deletion and its
        // grants' revocation go together.
        let mut deleted = self
            // A code that made a grant is kept a day past its deadline, so
            // that a late replay still revokes what it issued.
            .execute(
                "DELETE FROM oauth_codes WHERE expires_at <= $1 \
                 AND (grant_id IS NULL OR expires_at <= $2)",
                &[&now_ms, &(now_ms - LAPSED_KEPT_MS)],
            )
            .await?;
        {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(db_error)?;
            // A client a racing exchange or refresh holds is waited for,
            // then read again: used now, it is no longer stale.
            let stale: Vec<String> = tx
                .query(
                    "DELETE FROM oauth_clients WHERE origin <> 'preregistered' \
                     AND ((last_used_at IS NULL AND created_at <= $1) OR last_used_at <= $2) \
                     RETURNING id",
                    &[
                        &(now_ms - UNUSED_CLIENT_KEPT_MS),
                        &(now_ms - IDLE_CLIENT_KEPT_MS),
                    ],
                )
                .await
                .map_err(db_error)?
                .iter()
                .map(|row| col(row, 0))
                .collect::<StoreResult<_>>()?;
            if !stale.is_empty() {
                revoke_client_grants(&tx, &stale, now_ms).await?;
            }
            tx.commit().await.map_err(db_error)?;
            deleted += stale.len() as u64;
        }
        let lapsed_before = now_ms - LAPSED_KEPT_MS;
        // Refresh tokens before their grants: a refresh locks its token
        // first, then the grant.
        deleted += self
            .execute(
                &format!(
                    "DELETE FROM oauth_refresh_tokens WHERE expires_at <= $2 \
                     OR grant_id IN (SELECT id FROM oauth_grants WHERE {LAPSED_GRANT})"
                ),
                &[&lapsed_before, &now_ms],
            )
            .await?;
        deleted += self
            .execute(
                &format!(
                    "DELETE FROM tokens WHERE grant_id IS NOT NULL AND (expires_at <= $1 \
                     OR grant_id IN (SELECT id FROM oauth_grants WHERE {LAPSED_GRANT}))"
                ),
                &[&lapsed_before],
            )
            .await?;
        deleted += self
            .execute(
                &format!("DELETE FROM oauth_grants WHERE {LAPSED_GRANT}"),
                &[&lapsed_before],
            )
            .await?;
        self.access_changed();
        Ok(deleted)
    }
}

/// A grant revoked or lapsed by `$1` (a day before now).
const LAPSED_GRANT: &str = "(revoked_at <= $1 OR expires_at <= $1)";

#[async_trait]
impl SignInStore for PgStore {
    async fn insert_login_link(&self, link: LoginLinkRecord) -> StoreResult<()> {
        self.execute(
            &format!("INSERT INTO login_links ({LOGIN_LINK_COLUMNS}) VALUES ($1, $2, $3, $4, $5)"),
            &[
                &link.link_hash,
                &link.principal.account_id,
                &link.principal.org_id,
                &link.created_at_ms,
                &link.expires_at_ms,
            ],
        )
        .await?;
        Ok(())
    }

    async fn redeem_login_link(
        &self,
        link_hash: &[u8],
        at_ms: i64,
    ) -> StoreResult<Option<Principal>> {
        // One conditional write: of racing redeemers one gets the row.
        let used = self
            .query_opt(
                "UPDATE login_links SET used_at = $2 WHERE link_hash = $1 AND used_at IS NULL \
                 RETURNING account_id, org_id, expires_at",
                &[&link_hash, &at_ms],
            )
            .await?;
        let Some(row) = used else { return Ok(None) };
        let expires_at: i64 = col(&row, 2)?;
        if expires_at <= at_ms {
            return Ok(None);
        }
        Ok(Some(Principal {
            account_id: col(&row, 0)?,
            org_id: col(&row, 1)?,
        }))
    }

    async fn insert_console_session(&self, s: ConsoleSessionRecord) -> StoreResult<()> {
        self.execute(
            &format!(
                "INSERT INTO console_sessions ({CONSOLE_SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"
            ),
            &[
                &s.session_hash,
                &s.principal.account_id,
                &s.principal.org_id,
                &s.created_at_ms,
                &s.last_seen_at_ms,
                &s.token_id,
            ],
        )
        .await?;
        Ok(())
    }

    async fn find_console_session(
        &self,
        session_hash: &[u8],
    ) -> StoreResult<Option<ConsoleSessionRecord>> {
        self.query_opt(
            &format!(
                "SELECT {CONSOLE_SESSION_COLUMNS} FROM console_sessions WHERE session_hash = $1"
            ),
            &[&session_hash],
        )
        .await?
        .as_ref()
        .map(console_session_from_row)
        .transpose()
    }

    async fn touch_console_session(&self, session_hash: &[u8], at_ms: i64) -> StoreResult<()> {
        self.execute(
            "UPDATE console_sessions SET last_seen_at = GREATEST(last_seen_at, $2) WHERE session_hash = $1",
            &[&session_hash, &at_ms],
        )
        .await?;
        Ok(())
    }

    async fn set_console_session_org(
        &self,
        session_hash: &[u8],
        org_id: &str,
    ) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE console_sessions SET org_id = $2 WHERE session_hash = $1 \
                 AND EXISTS (SELECT 1 FROM memberships m \
                             WHERE m.account_id = console_sessions.account_id AND m.org_id = $2)",
                &[&session_hash, &org_id],
            )
            .await?;
        Ok(n > 0)
    }

    async fn delete_console_session(&self, session_hash: &[u8]) -> StoreResult<bool> {
        let n = self
            .execute(
                "DELETE FROM console_sessions WHERE session_hash = $1",
                &[&session_hash],
            )
            .await?;
        Ok(n > 0)
    }

    async fn gc_sign_in(&self, now_ms: i64, idle_before_ms: i64) -> StoreResult<u64> {
        let links = self
            .execute("DELETE FROM login_links WHERE expires_at <= $1", &[&now_ms])
            .await?;
        let sessions = self
            .execute(
                "DELETE FROM console_sessions WHERE last_seen_at < $1",
                &[&idle_before_ms],
            )
            .await?;
        Ok(links + sessions)
    }
}

/// Revokes the grant and every access token issued under it; whether the
/// grant exists. The first revocation's time stays. Two statements: the
/// second, with a snapshot taken once the first holds the grant, sees a
/// token a transaction it waited for issued under it.
async fn revoke_grant(tx: &Transaction<'_>, id: &str, at_ms: i64) -> StoreResult<bool> {
    let found = tx
        .execute(
            "UPDATE oauth_grants SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
            &[&id, &at_ms],
        )
        .await
        .map_err(db_error)?;
    tx.execute(
        "UPDATE tokens SET revoked_at = $2 WHERE grant_id = $1 AND revoked_at IS NULL",
        &[&id, &at_ms],
    )
    .await
    .map_err(db_error)?;
    Ok(found > 0)
}

/// Revokes every grant of the clients, and their access tokens (as
/// [`revoke_grant`], in two statements).
async fn revoke_client_grants(
    tx: &Transaction<'_>,
    client_ids: &[String],
    at_ms: i64,
) -> StoreResult<()> {
    tx.execute(
        "UPDATE oauth_grants SET revoked_at = COALESCE(revoked_at, $2) WHERE client_id = ANY($1)",
        &[&client_ids, &at_ms],
    )
    .await
    .map_err(db_error)?;
    tx.execute(
        "UPDATE tokens SET revoked_at = $2 WHERE revoked_at IS NULL \
         AND grant_id IN (SELECT id FROM oauth_grants WHERE client_id = ANY($1))",
        &[&client_ids, &at_ms],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// Records that a token was issued to the client (its last use only moves
/// forward), holding its row until commit; false when there is no such
/// client.
async fn mark_client_used(tx: &Transaction<'_>, client_id: &str, at_ms: i64) -> StoreResult<bool> {
    let n = tx
        .execute(
            "UPDATE oauth_clients SET last_used_at = GREATEST(last_used_at, $2) WHERE id = $1",
            &[&client_id, &at_ms],
        )
        .await
        .map_err(db_error)?;
    Ok(n > 0)
}

/// Writes what one exchange or refresh issues under `grant`: its access
/// token (a row of `tokens`) and its refresh token, not rotated yet.
async fn issue(
    tx: &Transaction<'_>,
    grant: &OAuthGrantRecord,
    tokens: &IssuedTokens,
) -> StoreResult<()> {
    insert_token_row(tx, &access_token(grant, tokens)).await?;
    tx.execute(
        "INSERT INTO oauth_refresh_tokens (token_hash, grant_id, issued_at, expires_at, rotated_at) \
         VALUES ($1, $2, $3, $4, NULL)",
        &[
            &tokens.refresh_hash,
            &grant.id,
            &tokens.issued_at_ms,
            &tokens.refresh_expires_at_ms.min(grant.expires_at_ms),
        ],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

fn client_from_row(r: &Row) -> StoreResult<OAuthClientRecord> {
    let uris: &str = col(r, 3)?;
    let origin: &str = col(r, 5)?;
    Ok(OAuthClientRecord {
        id: col(r, 0)?,
        secret_hash: col(r, 1)?,
        auth_method: col(r, 2)?,
        redirect_uris: redirect_uris_from_json(uris).map_err(|e| {
            StoreError::database_caused("an OAuth client's stored redirect URIs are unreadable", e)
        })?,
        client_name: col(r, 4)?,
        origin: parse_origin(origin).map_err(|e| StoreError::database_caused(e.to_string(), e))?,
        created_at_ms: col(r, 6)?,
        last_used_at_ms: col(r, 7)?,
    })
}

fn code_from_row(r: &Row) -> StoreResult<OAuthCodeRecord> {
    Ok(OAuthCodeRecord {
        code_hash: col(r, 0)?,
        client_id: col(r, 1)?,
        redirect_uri: col(r, 2)?,
        code_challenge: col(r, 3)?,
        resource: col(r, 4)?,
        scope: col(r, 5)?,
        principal: Principal {
            account_id: col(r, 6)?,
            org_id: col(r, 7)?,
        },
        created_at_ms: col(r, 8)?,
        expires_at_ms: col(r, 9)?,
    })
}

fn grant_from_row(r: &Row) -> StoreResult<OAuthGrantRecord> {
    Ok(OAuthGrantRecord {
        id: col(r, 0)?,
        client_id: col(r, 1)?,
        principal: Principal {
            account_id: col(r, 2)?,
            org_id: col(r, 3)?,
        },
        scope: col(r, 4)?,
        resource: col(r, 5)?,
        redirect_uri: col(r, 6)?,
        created_at_ms: col(r, 7)?,
        last_used_at_ms: col(r, 8)?,
        expires_at_ms: col(r, 9)?,
        revoked_at_ms: col(r, 10)?,
    })
}

fn console_session_from_row(r: &Row) -> StoreResult<ConsoleSessionRecord> {
    Ok(ConsoleSessionRecord {
        session_hash: col(r, 0)?,
        principal: Principal {
            account_id: col(r, 1)?,
            org_id: col(r, 2)?,
        },
        created_at_ms: col(r, 3)?,
        last_seen_at_ms: col(r, 4)?,
        token_id: col(r, 5)?,
    })
}
