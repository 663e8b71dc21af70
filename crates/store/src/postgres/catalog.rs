//! Integrations and the org's catalog version on Postgres: [`CatalogStore`].

use async_trait::async_trait;

use super::notices::CATALOG_CHANNEL;
use super::{PgStore, col, db_error, pg_text};
use crate::packed::pack;
use crate::*;

use super::rows::*;

#[async_trait]
impl CatalogStore for PgStore {
    async fn upsert_integration(&self, r: IntegrationRecord) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // The bump's row lock orders the org's writers; the record's
        // revision is the version this write made.
        let revision = bump_catalog_version(&tx, &r.org_id).await?;
        tx.execute(
            "INSERT INTO integrations (org_id, namespace, kind, source, base_url, tool_count, document, created_at, updated_at, revision, search_index) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10) \
             ON CONFLICT (org_id, namespace) DO UPDATE SET kind = excluded.kind, source = excluded.source, \
             base_url = excluded.base_url, tool_count = excluded.tool_count, document = excluded.document, \
             updated_at = excluded.updated_at, revision = excluded.revision, search_index = excluded.search_index",
            &[
                &r.org_id,
                &r.namespace,
                &r.kind,
                &pg_text(&r.source),
                &r.base_url.as_deref().map(pg_text),
                &r.tool_count,
                &pack(&r.document),
                &r.updated_at_ms,
                &revision,
                &r.search_index,
            ],
        )
        .await
        .map_err(db_error)?;
        notify(&tx, CATALOG_CHANNEL, &r.org_id).await?;
        tx.commit().await.map_err(db_error)?;
        self.catalog_changed();
        Ok(())
    }

    async fn list_integrations(
        &self,
        org_id: &str,
        with_documents: bool,
    ) -> StoreResult<Vec<IntegrationRecord>> {
        let sql = if with_documents {
            "SELECT org_id, namespace, kind, source, base_url, tool_count, updated_at, revision, document FROM integrations WHERE org_id = $1 ORDER BY namespace COLLATE \"C\""
        } else {
            "SELECT org_id, namespace, kind, source, base_url, tool_count, updated_at, revision FROM integrations WHERE org_id = $1 ORDER BY namespace COLLATE \"C\""
        };
        let found = self.query(sql, &[&org_id]).await?;
        rows(found, |r| {
            Ok(IntegrationRecord {
                org_id: col(r, 0)?,
                namespace: col(r, 1)?,
                kind: col(r, 2)?,
                source: col(r, 3)?,
                base_url: col(r, 4)?,
                tool_count: col(r, 5)?,
                updated_at_ms: col(r, 6)?,
                revision: col(r, 7)?,
                document: if with_documents {
                    document(col(r, 8)?)?
                } else {
                    String::new()
                },
                search_index: None,
            })
        })
    }

    async fn remove_integration(&self, org_id: &str, namespace: &str) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let n = tx
            .execute(
                "DELETE FROM integrations WHERE org_id = $1 AND namespace = $2",
                &[&org_id, &namespace],
            )
            .await
            .map_err(db_error)?;
        if n > 0 {
            bump_catalog_version(&tx, org_id).await?;
            notify(&tx, CATALOG_CHANNEL, org_id).await?;
        }
        tx.commit().await.map_err(db_error)?;
        self.catalog_changed();
        Ok(n > 0)
    }

    async fn integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
    ) -> StoreResult<Option<IntegrationDocument>> {
        let row = self
            .query_opt(
                "SELECT document, search_index FROM integrations WHERE org_id = $1 AND namespace = $2 AND revision = $3",
                &[&org_id, &namespace, &revision],
            )
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(IntegrationDocument {
            document: document(col(&row, 0)?)?,
            search_index: col(&row, 1)?,
        }))
    }

    async fn replace_integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        document: String,
    ) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE integrations SET document = $4 WHERE org_id = $1 AND namespace = $2 AND revision = $3",
                &[&org_id, &namespace, &revision, &pack(&document)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn replace_search_index(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        search_index: Vec<u8>,
    ) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE integrations SET search_index = $4 WHERE org_id = $1 AND namespace = $2 AND revision = $3",
                &[&org_id, &namespace, &revision, &search_index],
            )
            .await?;
        Ok(n == 1)
    }

    async fn catalog_version(&self, org_id: &str) -> StoreResult<i64> {
        // Kept until a catalog change is notified (or this store makes
        // one): the read it saves was one round trip on every execution.
        let revision = self.catalog_revision();
        if let Some(version) = revision.and_then(|r| self.catalog_versions.get(org_id, r)) {
            return Ok(version);
        }
        let version = self.committed_catalog_version(org_id).await?;
        if let Some(revision) = revision {
            self.catalog_versions.keep(org_id, revision, version);
        }
        Ok(version)
    }

    async fn committed_catalog_version(&self, org_id: &str) -> StoreResult<i64> {
        match self.query_opt(CATALOG_VERSION, &[&org_id]).await? {
            Some(row) => col(&row, 0),
            None => Ok(0),
        }
    }
}
