//! Accounts, orgs and API tokens on SQLite: [`AccountStore`].

use super::*;
use crate::orgs::{OrgKey, new_account_id, new_org_id};

#[async_trait]
impl AccountStore for SqliteStore {
    async fn ensure_account(&self, email: &str, org: Option<&str>) -> StoreResult<Principal> {
        let (email, choice) = OrgChoice::asked(email, org)?;
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let now = now_ms();
            let account_id: String = match tx
                .query_row("SELECT id FROM accounts WHERE email = ?1", [&email], |r| {
                    r.get(0)
                })
                .optional()?
            {
                Some(id) => id,
                None => {
                    let id = new_account_id();
                    tx.execute(
                        "INSERT INTO accounts (id, email, created_at) VALUES (?1, ?2, ?3)",
                        params![id, email, now],
                    )?;
                    id
                }
            };
            let wanted = choice.wanted(&email, &account_id);
            let found = match wanted.key {
                OrgKey::Owner(owner) => tx
                    .query_row(
                        "SELECT id, owner_account_id FROM orgs WHERE owner_account_id = ?1",
                        [owner],
                        org_row,
                    )
                    .optional()?,
                OrgKey::Name(name) => tx
                    .query_row(
                        "SELECT id, owner_account_id FROM orgs WHERE name = ?1",
                        [name],
                        org_row,
                    )
                    .optional()?,
            };
            let org_id = match wanted.settle(found, &account_id)? {
                Some(id) => id,
                None => {
                    let id = new_org_id();
                    tx.execute(
                        "INSERT INTO orgs (id, name, created_at, owner_account_id) VALUES (?1, ?2, ?3, ?4)",
                        params![id, wanted.name, now, wanted.owner],
                    )?;
                    id
                }
            };
            tx.execute(
                "INSERT OR IGNORE INTO memberships (account_id, org_id) VALUES (?1, ?2)",
                params![account_id, org_id],
            )?;
            tx.commit()?;
            Ok(Principal { account_id, org_id })
        })
        .await
    }

    async fn insert_token(&self, t: TokenRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                insert_token_row(conn, &t)?;
                Ok(())
            })
            .await
    }

    fn access_revision(&self) -> Option<u64> {
        let mut watch = self.watch.lock().ok()?;
        match watch.current() {
            Ok(revision) => Some(revision),
            Err(e) => {
                tracing::warn!(error = %e, "could not read the access revision; reading through");
                None
            }
        }
    }

    async fn find_token(&self, id: &str) -> StoreResult<Option<TokenRecord>> {
        // Read on every request (through the token cache): a literal, not
        // a statement formatted each time. The columns are TOKEN_COLUMNS.
        self.read_one(
            "SELECT id, secret_hash, account_id, org_id, created_at, expires_at, revoked_at, grant_id \
             FROM tokens WHERE id = ?1",
            [id],
            token_from_row,
        )
    }

    async fn list_tokens(&self, org_id: &str) -> StoreResult<Vec<TokenRecord>> {
        self.read_all(
            &format!(
                "SELECT {TOKEN_COLUMNS} FROM tokens WHERE org_id = ?1 AND grant_id IS NULL \
                 ORDER BY created_at DESC, id DESC"
            ),
            [org_id],
            token_from_row,
        )
    }

    async fn revoke_token(&self, id: &str, at_ms: i64) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                let n = conn.execute(
                    "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
                    params![id, at_ms],
                )?;
                Ok(n > 0)
            })
            .await
    }

    async fn find_org(&self, name: &str) -> StoreResult<Option<String>> {
        let name = name.trim();
        // Personal orgs are named after the (lowercased) email.
        let name = if name.contains('@') {
            name.to_lowercase()
        } else {
            name.to_string()
        };
        self.read_one(
            "SELECT id FROM orgs WHERE name = ?1 OR id = ?1",
            [name],
            |r| r.get(0),
        )
    }

    async fn list_orgs(&self) -> StoreResult<Vec<(String, String)>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached("SELECT id, name FROM orgs ORDER BY name")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn account_orgs(&self, account_id: &str) -> StoreResult<Vec<(String, String)>> {
        self.read_all(
            "SELECT o.id, o.name FROM memberships m JOIN orgs o ON o.id = m.org_id \
             WHERE m.account_id = ?1 ORDER BY o.name",
            [account_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    async fn org_account(&self, org_id: &str) -> StoreResult<Option<Principal>> {
        self.read_one(ORG_ACCOUNT, [org_id], |r| {
            Ok(Principal {
                account_id: r.get(0)?,
                org_id: org_id.to_string(),
            })
        })
    }
}
