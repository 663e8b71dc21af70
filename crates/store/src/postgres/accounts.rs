//! Accounts, orgs and API tokens on Postgres: [`AccountStore`].

use async_trait::async_trait;

use super::{PgStore, col, db_error, pg_text};
use crate::orgs::OrgChoice;
use crate::*;

use super::rows::*;
use crate::columns::{ORG_ACCOUNT, TOKEN_COLUMNS};
use crate::orgs::{OrgKey, new_account_id, new_org_id};

#[async_trait]
impl AccountStore for PgStore {
    async fn ensure_account(&self, email: &str, org: Option<&str>) -> StoreResult<Principal> {
        let (email, choice) = OrgChoice::asked(email, org)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&ACCOUNTS_LOCK],
        )
        .await
        .map_err(db_error)?;
        let now = now_ms();
        let account_id: String = match tx
            .query_opt("SELECT id FROM accounts WHERE email = $1", &[&email])
            .await
            .map_err(db_error)?
        {
            Some(row) => col(&row, 0)?,
            None => {
                let id = new_account_id();
                tx.execute(
                    "INSERT INTO accounts (id, email, created_at) VALUES ($1, $2, $3)",
                    &[&id, &email, &now],
                )
                .await
                .map_err(db_error)?;
                id
            }
        };
        let wanted = choice.wanted(&email, &account_id);
        let found = match wanted.key {
            OrgKey::Owner(owner) => tx
                .query_opt(
                    "SELECT id, owner_account_id FROM orgs WHERE owner_account_id = $1",
                    &[&owner],
                )
                .await
                .map_err(db_error)?,
            OrgKey::Name(name) => tx
                .query_opt(
                    "SELECT id, owner_account_id FROM orgs WHERE name = $1",
                    &[&pg_text(name)],
                )
                .await
                .map_err(db_error)?,
        };
        let found = match found {
            Some(row) => Some((col::<String>(&row, 0)?, col::<Option<String>>(&row, 1)?)),
            None => None,
        };
        let org_id = match wanted.settle(found, &account_id)? {
            Some(id) => id,
            None => {
                let id = new_org_id();
                tx.execute(
                    "INSERT INTO orgs (id, name, created_at, owner_account_id) VALUES ($1, $2, $3, $4)",
                    &[&id, &pg_text(wanted.name), &now, &wanted.owner],
                )
                .await
                .map_err(db_error)?;
                id
            }
        };
        tx.execute(
            "INSERT INTO memberships (account_id, org_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&account_id, &org_id],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(Principal { account_id, org_id })
    }

    async fn insert_token(&self, t: TokenRecord) -> StoreResult<()> {
        // A new token moves no revision: nothing cached names it.
        self.execute(INSERT_TOKEN, &token_params(&t)).await?;
        Ok(())
    }

    async fn find_token(&self, id: &str) -> StoreResult<Option<TokenRecord>> {
        // Read on every request (through the token cache): a literal, not
        // a statement formatted each time. The columns are TOKEN_COLUMNS.
        self.query_opt(
            "SELECT id, secret_hash, account_id, org_id, created_at, expires_at, revoked_at, grant_id \
             FROM tokens WHERE id = $1",
            &[&id],
        )
        .await?
        .as_ref()
        .map(token_from_row)
        .transpose()
    }

    async fn list_tokens(&self, org_id: &str) -> StoreResult<Vec<TokenRecord>> {
        let found = self
            .query(
                &format!(
                    "SELECT {TOKEN_COLUMNS} FROM tokens WHERE org_id = $1 AND grant_id IS NULL \
                     ORDER BY created_at DESC, id DESC"
                ),
                &[&org_id],
            )
            .await?;
        rows(found, token_from_row)
    }

    async fn revoke_token(&self, id: &str, at_ms: i64) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
                &[&id, &at_ms],
            )
            .await?;
        self.access_changed();
        Ok(n > 0)
    }

    fn access_revision(&self) -> Option<u64> {
        PgStore::access_revision(self)
    }

    async fn find_org(&self, name: &str) -> StoreResult<Option<String>> {
        let name = name.trim();
        // Personal orgs are named after the (lowercased) email.
        let name = if name.contains('@') {
            name.to_lowercase()
        } else {
            name.to_string()
        };
        match self
            .query_opt(
                "SELECT id FROM orgs WHERE name = $1 OR id = $1",
                &[&pg_text(&name)],
            )
            .await?
        {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn list_orgs(&self) -> StoreResult<Vec<(String, String)>> {
        // "C": byte order, SQLite's BINARY, whatever the database's locale.
        let found = self
            .query("SELECT id, name FROM orgs ORDER BY name COLLATE \"C\"", &[])
            .await?;
        rows(found, |r| Ok((col(r, 0)?, col(r, 1)?)))
    }

    async fn account_orgs(&self, account_id: &str) -> StoreResult<Vec<(String, String)>> {
        let found = self
            .query(
                "SELECT o.id, o.name FROM memberships m JOIN orgs o ON o.id = m.org_id \
                 WHERE m.account_id = $1 ORDER BY o.name COLLATE \"C\"",
                &[&account_id],
            )
            .await?;
        rows(found, |r| Ok((col(r, 0)?, col(r, 1)?)))
    }

    async fn org_account(&self, org_id: &str) -> StoreResult<Option<Principal>> {
        let found = self.query_opt(ORG_ACCOUNT, &[&org_id]).await?;
        match found {
            Some(row) => Ok(Some(Principal {
                account_id: col(&row, 0)?,
                org_id: org_id.to_string(),
            })),
            None => Ok(None),
        }
    }
}
