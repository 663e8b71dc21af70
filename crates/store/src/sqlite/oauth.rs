//! The built-in authorization server's state and browser sign-in on
//! SQLite: [`OAuthStore`], [`SignInStore`].
//!
//! Every method that reads and then writes runs as one write on the writer
//! thread (its own savepoint of the group commit): nothing else writes in
//! between, so a code is taken once, a refresh token is rotated once, and a
//! replay or a reuse revokes exactly what was issued before it. A refusal
//! that revokes ([`RefreshRefusal::Reused`], [`CodeTake::Replayed`]) is an
//! `Ok` of the write, so its revocation commits.

use super::*;
use crate::oauth::{
    IDLE_CLIENT_KEPT_MS, LAPSED_KEPT_MS, Rotation, UNUSED_CLIENT_KEPT_MS, access_token,
    parse_origin, redirect_uris_from_json, redirect_uris_to_json, rotation,
};

#[async_trait]
impl OAuthStore for SqliteStore {
    async fn insert_oauth_client(&self, c: OAuthClientRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                conn.execute(
                    &format!("INSERT INTO oauth_clients ({OAUTH_CLIENT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                    params![
                        c.id,
                        c.secret_hash,
                        c.auth_method,
                        redirect_uris_to_json(&c.redirect_uris),
                        c.client_name,
                        c.origin.as_str(),
                        c.created_at_ms,
                        c.last_used_at_ms
                    ],
                )?;
                Ok(())
            })
            .await
    }

    async fn save_metadata_client(&self, c: OAuthClientRecord) -> StoreResult<bool> {
        self.writer
            .write(move |conn| {
                let saved = conn.execute(
                    &format!(
                        "INSERT INTO oauth_clients ({OAUTH_CLIENT_COLUMNS}) \
                         VALUES (?1, NULL, 'none', ?2, ?3, 'metadata_document', ?4, NULL) \
                         ON CONFLICT (id) DO UPDATE SET redirect_uris = excluded.redirect_uris, \
                         client_name = excluded.client_name \
                         WHERE oauth_clients.origin = 'metadata_document'"
                    ),
                    params![
                        c.id,
                        redirect_uris_to_json(&c.redirect_uris),
                        c.client_name,
                        c.created_at_ms,
                    ],
                )?;
                Ok(saved > 0)
            })
            .await
    }

    async fn find_oauth_client(&self, id: &str) -> StoreResult<Option<OAuthClientRecord>> {
        self.read_one(
            &format!("SELECT {OAUTH_CLIENT_COLUMNS} FROM oauth_clients WHERE id = ?1"),
            [id],
            client_from_row,
        )
    }

    async fn list_oauth_clients(&self) -> StoreResult<Vec<OAuthClientRecord>> {
        self.read_all(
            &format!(
                "SELECT {OAUTH_CLIENT_COLUMNS} FROM oauth_clients \
                 ORDER BY created_at DESC, id DESC LIMIT ?1"
            ),
            [MAX_OAUTH_LISTED as i64],
            client_from_row,
        )
    }

    async fn delete_oauth_client(&self, id: &str, at_ms: i64) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                let existed = conn.execute("DELETE FROM oauth_clients WHERE id = ?1", [&id])? > 0;
                revoke_client_grants(conn, &id, at_ms)?;
                Ok(existed)
            })
            .await
    }

    async fn insert_oauth_code(&self, c: OAuthCodeRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                conn.execute(
                    &format!(
                        "INSERT INTO oauth_codes ({OAUTH_CODE_COLUMNS}) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                    ),
                    params![
                        c.code_hash,
                        c.client_id,
                        c.redirect_uri,
                        c.code_challenge,
                        c.resource,
                        c.scope,
                        c.principal.account_id,
                        c.principal.org_id,
                        c.created_at_ms,
                        c.expires_at_ms
                    ],
                )?;
                Ok(())
            })
            .await
    }

    async fn take_oauth_code(&self, code_hash: &[u8], at_ms: i64) -> StoreResult<CodeTake> {
        let code_hash = code_hash.to_vec();
        self.writer
            .write(move |conn| {
                let found = conn
                    .prepare_cached(&format!(
                        "SELECT {OAUTH_CODE_COLUMNS}, used_at, grant_id FROM oauth_codes WHERE code_hash = ?1"
                    ))?
                    .query_row([&code_hash], |r| {
                        Ok((
                            code_from_row(r)?,
                            r.get::<_, Option<i64>>(10)?,
                            r.get::<_, Option<String>>(11)?,
                        ))
                    })
                    .optional()?;
                let Some((code, used_at, grant_id)) = found else {
                    return Ok(CodeTake::Unknown);
                };
                if used_at.is_some() {
                    // A second presentation, in time or not: what the first
                    // issued is revoked, and no grant is made of it later.
                    conn.execute(
                        "UPDATE oauth_codes SET replayed_at = COALESCE(replayed_at, ?2) WHERE code_hash = ?1",
                        params![code_hash, at_ms],
                    )?;
                    if let Some(grant_id) = grant_id {
                        revoke_grant(conn, &grant_id, at_ms)?;
                    }
                    return Ok(CodeTake::Replayed);
                }
                conn.execute(
                    "UPDATE oauth_codes SET used_at = ?2 WHERE code_hash = ?1",
                    params![code_hash, at_ms],
                )?;
                if code.expires_at_ms <= at_ms {
                    return Ok(CodeTake::Unknown);
                }
                Ok(CodeTake::Fresh(code))
            })
            .await
    }

    async fn create_oauth_grant(
        &self,
        code_hash: &[u8],
        grant: OAuthGrantRecord,
        tokens: IssuedTokens,
    ) -> StoreResult<bool> {
        let code_hash = code_hash.to_vec();
        self.writer
            .write(move |conn| {
                let replayed: Option<Option<i64>> = conn
                    .query_row(
                        "SELECT replayed_at FROM oauth_codes WHERE code_hash = ?1",
                        [&code_hash],
                        |r| r.get(0),
                    )
                    .optional()?;
                // A code gone (collected past its deadline) or replayed
                // makes nothing; so does a client deleted meanwhile.
                if !matches!(replayed, Some(None)) {
                    return Ok(false);
                }
                if !mark_client_used(conn, &grant.client_id, tokens.issued_at_ms)? {
                    return Ok(false);
                }
                conn.execute(
                    &format!(
                        "INSERT INTO oauth_grants ({OAUTH_GRANT_COLUMNS}) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
                    ),
                    params![
                        grant.id,
                        grant.client_id,
                        grant.principal.account_id,
                        grant.principal.org_id,
                        grant.scope,
                        grant.resource,
                        grant.redirect_uri,
                        grant.created_at_ms,
                        grant.last_used_at_ms,
                        grant.expires_at_ms,
                        grant.revoked_at_ms
                    ],
                )?;
                issue(conn, &grant, &tokens)?;
                conn.execute(
                    "UPDATE oauth_codes SET grant_id = ?2 WHERE code_hash = ?1",
                    params![code_hash, grant.id],
                )?;
                Ok(true)
            })
            .await
    }

    async fn refresh_oauth_grant(
        &self,
        refresh: RefreshUse,
        tokens: IssuedTokens,
    ) -> StoreResult<Result<OAuthGrantRecord, RefreshRefusal>> {
        self.writer
            .write(move |conn| {
                let at = refresh.at_ms;
                let found: Option<(String, i64, Option<i64>)> = conn
                    .prepare_cached(
                        "SELECT grant_id, expires_at, rotated_at FROM oauth_refresh_tokens WHERE token_hash = ?1",
                    )?
                    .query_row([&refresh.token_hash], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                    .optional()?;
                let Some((grant_id, expires_at, rotated_at)) = found else {
                    return Ok(Err(RefreshRefusal::Invalid));
                };
                if expires_at <= at {
                    return Ok(Err(RefreshRefusal::Invalid));
                }
                let grant = conn
                    .prepare_cached(&format!(
                        "SELECT {OAUTH_GRANT_COLUMNS} FROM oauth_grants WHERE id = ?1"
                    ))?
                    .query_row([&grant_id], grant_from_row)
                    .optional()?;
                let Some(mut grant) = grant else {
                    return Ok(Err(RefreshRefusal::Invalid));
                };
                // Another client's token is refused before it can revoke
                // anything; so is one whose client was deleted.
                if !grant.is_current(at) || grant.client_id != refresh.client_id {
                    return Ok(Err(RefreshRefusal::Invalid));
                }
                let client_exists = conn
                    .prepare_cached("SELECT 1 FROM oauth_clients WHERE id = ?1")?
                    .exists([&grant.client_id])?;
                if !client_exists {
                    return Ok(Err(RefreshRefusal::Invalid));
                }
                match rotation(rotated_at, at, refresh.grace_ms) {
                    Rotation::First => {
                        conn.execute(
                            "UPDATE oauth_refresh_tokens SET rotated_at = ?2 WHERE token_hash = ?1",
                            params![refresh.token_hash, at],
                        )?;
                    }
                    Rotation::WithinGrace => {}
                    Rotation::Reused => {
                        revoke_grant(conn, &grant.id, at)?;
                        return Ok(Err(RefreshRefusal::Reused));
                    }
                }
                issue(conn, &grant, &tokens)?;
                conn.execute(
                    "UPDATE oauth_grants SET last_used_at = MAX(last_used_at, ?2) WHERE id = ?1",
                    params![grant.id, tokens.issued_at_ms],
                )?;
                mark_client_used(conn, &grant.client_id, tokens.issued_at_ms)?;
                grant.last_used_at_ms = grant.last_used_at_ms.max(tokens.issued_at_ms);
                Ok(Ok(grant))
            })
            .await
    }

    async fn grant_of_refresh_token(&self, token_hash: &[u8]) -> StoreResult<Option<String>> {
        self.read_one(
            "SELECT grant_id FROM oauth_refresh_tokens WHERE token_hash = ?1",
            [token_hash],
            |r| r.get(0),
        )
    }

    async fn find_oauth_grant(&self, id: &str) -> StoreResult<Option<OAuthGrantRecord>> {
        self.read_one(
            &format!("SELECT {OAUTH_GRANT_COLUMNS} FROM oauth_grants WHERE id = ?1"),
            [id],
            grant_from_row,
        )
    }

    async fn list_oauth_grants(&self, org_id: &str) -> StoreResult<Vec<OAuthGrantRecord>> {
        self.read_all(
            &format!(
                "SELECT {OAUTH_GRANT_COLUMNS} FROM oauth_grants WHERE org_id = ?1 \
                 ORDER BY created_at DESC, id DESC LIMIT ?2"
            ),
            params![org_id, MAX_OAUTH_LISTED as i64],
            grant_from_row,
        )
    }

    async fn revoke_oauth_grant(&self, id: &str, at_ms: i64) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer
            .write(move |conn| revoke_grant(conn, &id, at_ms))
            .await
    }

    async fn gc_oauth(&self, now_ms: i64) -> StoreResult<u64> {
        self.writer
            .write(move |conn| {
                let mut deleted =
                    // A code that made a grant is kept a day past its deadline, so
                    // that a late replay still revokes what it issued.
                    conn.execute(
                        "DELETE FROM oauth_codes WHERE expires_at <= ?1 \
                         AND (grant_id IS NULL OR expires_at <= ?2)",
                        [now_ms, now_ms - LAPSED_KEPT_MS],
                    )?;
                let stale: Vec<String> = conn
                    .prepare_cached(
                        "SELECT id FROM oauth_clients WHERE origin <> 'preregistered' \
                         AND ((last_used_at IS NULL AND created_at <= ?1) OR last_used_at <= ?2)",
                    )?
                    .query_map(
                        params![now_ms - UNUSED_CLIENT_KEPT_MS, now_ms - IDLE_CLIENT_KEPT_MS],
                        |r| r.get(0),
                    )?
                    .collect::<Result<_, _>>()?;
                for id in &stale {
                    revoke_client_grants(conn, id, now_ms)?;
                    deleted += conn.execute("DELETE FROM oauth_clients WHERE id = ?1", [id])?;
                }
                let lapsed_before = now_ms - LAPSED_KEPT_MS;
                deleted += conn.execute(
                    &format!(
                        "DELETE FROM oauth_refresh_tokens WHERE expires_at <= ?1 \
                         OR grant_id IN (SELECT id FROM oauth_grants WHERE {LAPSED_GRANT})"
                    ),
                    params![now_ms, lapsed_before],
                )?;
                deleted += conn.execute(
                    &format!(
                        "DELETE FROM tokens WHERE grant_id IS NOT NULL AND (expires_at <= ?2 \
                         OR grant_id IN (SELECT id FROM oauth_grants WHERE {LAPSED_GRANT}))"
                    ),
                    params![now_ms, lapsed_before],
                )?;
                deleted += conn.execute(
                    &format!("DELETE FROM oauth_grants WHERE {LAPSED_GRANT}"),
                    params![now_ms, lapsed_before],
                )?;
                Ok(deleted as u64)
            })
            .await
    }
}

/// A grant revoked or lapsed by `?2` (a day before now; `?1`, now, is
/// bound beside it by every statement that names it).
const LAPSED_GRANT: &str = "(revoked_at <= ?2 OR expires_at <= ?2)";

#[async_trait]
impl SignInStore for SqliteStore {
    async fn insert_login_link(&self, link: LoginLinkRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                conn.execute(
                    &format!(
                        "INSERT INTO login_links ({LOGIN_LINK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)"
                    ),
                    params![
                        link.link_hash,
                        link.principal.account_id,
                        link.principal.org_id,
                        link.created_at_ms,
                        link.expires_at_ms
                    ],
                )?;
                Ok(())
            })
            .await
    }

    async fn redeem_login_link(
        &self,
        link_hash: &[u8],
        at_ms: i64,
    ) -> StoreResult<Option<Principal>> {
        let link_hash = link_hash.to_vec();
        self.writer
            .write(move |conn| {
                let used: Option<(String, String, i64)> = conn
                    .query_row(
                        "UPDATE login_links SET used_at = ?2 WHERE link_hash = ?1 AND used_at IS NULL \
                         RETURNING account_id, org_id, expires_at",
                        params![link_hash, at_ms],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()?;
                Ok(match used {
                    Some((account_id, org_id, expires_at)) if expires_at > at_ms => {
                        Some(Principal { account_id, org_id })
                    }
                    _ => None,
                })
            })
            .await
    }

    async fn insert_console_session(&self, s: ConsoleSessionRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                conn.execute(
                    &format!(
                        "INSERT INTO console_sessions ({CONSOLE_SESSION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
                    ),
                    params![
                        s.session_hash,
                        s.principal.account_id,
                        s.principal.org_id,
                        s.created_at_ms,
                        s.last_seen_at_ms,
                        s.token_id
                    ],
                )?;
                Ok(())
            })
            .await
    }

    async fn find_console_session(
        &self,
        session_hash: &[u8],
    ) -> StoreResult<Option<ConsoleSessionRecord>> {
        self.read_one(
            &format!(
                "SELECT {CONSOLE_SESSION_COLUMNS} FROM console_sessions WHERE session_hash = ?1"
            ),
            [session_hash],
            console_session_from_row,
        )
    }

    async fn touch_console_session(&self, session_hash: &[u8], at_ms: i64) -> StoreResult<()> {
        let session_hash = session_hash.to_vec();
        self.writer
            .write(move |conn| {
                conn.execute(
                    "UPDATE console_sessions SET last_seen_at = MAX(last_seen_at, ?2) WHERE session_hash = ?1",
                    params![session_hash, at_ms],
                )?;
                Ok(())
            })
            .await
    }

    async fn set_console_session_org(
        &self,
        session_hash: &[u8],
        org_id: &str,
    ) -> StoreResult<bool> {
        let (session_hash, org_id) = (session_hash.to_vec(), org_id.to_string());
        self.writer
            .write(move |conn| {
                Ok(conn.execute(SWITCH_CONSOLE_ORG, params![session_hash, org_id])? > 0)
            })
            .await
    }

    async fn delete_console_session(&self, session_hash: &[u8]) -> StoreResult<bool> {
        let session_hash = session_hash.to_vec();
        self.writer
            .write(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM console_sessions WHERE session_hash = ?1",
                    [session_hash],
                )? > 0)
            })
            .await
    }

    async fn gc_sign_in(&self, now_ms: i64, idle_before_ms: i64) -> StoreResult<u64> {
        self.writer
            .write(move |conn| {
                let links =
                    conn.execute("DELETE FROM login_links WHERE expires_at <= ?1", [now_ms])?;
                let sessions = conn.execute(
                    "DELETE FROM console_sessions WHERE last_seen_at < ?1",
                    [idle_before_ms],
                )?;
                Ok((links + sessions) as u64)
            })
            .await
    }
}

/// Moves a console session to another org, only one its account belongs
/// to (`?1` the session's hash, `?2` the org).
const SWITCH_CONSOLE_ORG: &str = "UPDATE console_sessions SET org_id = ?2 WHERE session_hash = ?1 \
     AND EXISTS (SELECT 1 FROM memberships m \
                 WHERE m.account_id = console_sessions.account_id AND m.org_id = ?2)";

/// Revokes the grant and every access token issued under it; whether the
/// grant exists. The first revocation's time stays.
fn revoke_grant(conn: &Connection, id: &str, at_ms: i64) -> StoreResult<bool> {
    let found = conn
        .prepare_cached(
            "UPDATE oauth_grants SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
        )?
        .execute(params![id, at_ms])?;
    conn.prepare_cached(
        "UPDATE tokens SET revoked_at = ?2 WHERE grant_id = ?1 AND revoked_at IS NULL",
    )?
    .execute(params![id, at_ms])?;
    Ok(found > 0)
}

/// Revokes every grant of a client, and their access tokens.
fn revoke_client_grants(conn: &Connection, client_id: &str, at_ms: i64) -> StoreResult<()> {
    conn.prepare_cached(
        "UPDATE oauth_grants SET revoked_at = COALESCE(revoked_at, ?2) WHERE client_id = ?1",
    )?
    .execute(params![client_id, at_ms])?;
    conn.prepare_cached(
        "UPDATE tokens SET revoked_at = ?2 WHERE revoked_at IS NULL \
         AND grant_id IN (SELECT id FROM oauth_grants WHERE client_id = ?1)",
    )?
    .execute(params![client_id, at_ms])?;
    Ok(())
}

/// Records that a token was issued to the client (its last use only moves
/// forward); false when there is no such client.
fn mark_client_used(conn: &Connection, client_id: &str, at_ms: i64) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE oauth_clients SET last_used_at = MAX(COALESCE(last_used_at, ?2), ?2) WHERE id = ?1",
        )?
        .execute(params![client_id, at_ms])?
        > 0)
}

/// Writes what one exchange or refresh issues under `grant`: its access
/// token (a row of `tokens`) and its refresh token, not rotated yet.
fn issue(conn: &Connection, grant: &OAuthGrantRecord, tokens: &IssuedTokens) -> StoreResult<()> {
    insert_token_row(conn, &access_token(grant, tokens))?;
    conn.prepare_cached(
        "INSERT INTO oauth_refresh_tokens (token_hash, grant_id, issued_at, expires_at, rotated_at) \
         VALUES (?1, ?2, ?3, ?4, NULL)",
    )?
    .execute(params![
        tokens.refresh_hash,
        grant.id,
        tokens.issued_at_ms,
        tokens.refresh_expires_at_ms.min(grant.expires_at_ms)
    ])?;
    Ok(())
}

/// A stored value the row reader cannot take, as rusqlite's error.
fn unreadable(
    index: usize,
    error: impl std::error::Error + Send + Sync + 'static,
) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(error))
}

fn client_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OAuthClientRecord> {
    let uris: String = r.get(3)?;
    let origin: String = r.get(5)?;
    Ok(OAuthClientRecord {
        id: r.get(0)?,
        secret_hash: r.get(1)?,
        auth_method: r.get(2)?,
        redirect_uris: redirect_uris_from_json(&uris).map_err(|e| unreadable(3, e))?,
        client_name: r.get(4)?,
        origin: parse_origin(&origin).map_err(|e| unreadable(5, e))?,
        created_at_ms: r.get(6)?,
        last_used_at_ms: r.get(7)?,
    })
}

fn code_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OAuthCodeRecord> {
    Ok(OAuthCodeRecord {
        code_hash: r.get(0)?,
        client_id: r.get(1)?,
        redirect_uri: r.get(2)?,
        code_challenge: r.get(3)?,
        resource: r.get(4)?,
        scope: r.get(5)?,
        principal: Principal {
            account_id: r.get(6)?,
            org_id: r.get(7)?,
        },
        created_at_ms: r.get(8)?,
        expires_at_ms: r.get(9)?,
    })
}

fn grant_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OAuthGrantRecord> {
    Ok(OAuthGrantRecord {
        id: r.get(0)?,
        client_id: r.get(1)?,
        principal: Principal {
            account_id: r.get(2)?,
            org_id: r.get(3)?,
        },
        scope: r.get(4)?,
        resource: r.get(5)?,
        redirect_uri: r.get(6)?,
        created_at_ms: r.get(7)?,
        last_used_at_ms: r.get(8)?,
        expires_at_ms: r.get(9)?,
        revoked_at_ms: r.get(10)?,
    })
}

fn console_session_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ConsoleSessionRecord> {
    Ok(ConsoleSessionRecord {
        session_hash: r.get(0)?,
        principal: Principal {
            account_id: r.get(1)?,
            org_id: r.get(2)?,
        },
        created_at_ms: r.get(3)?,
        last_seen_at_ms: r.get(4)?,
        token_id: r.get(5)?,
    })
}
