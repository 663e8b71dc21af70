//! Integrations and the org's catalog version on SQLite: [`CatalogStore`].

use super::*;

#[async_trait]
impl CatalogStore for SqliteStore {
    async fn upsert_integration(&self, r: IntegrationRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                bump_catalog_version(conn, &r.org_id)?;
                conn.execute(
                    "INSERT INTO integrations (org_id, namespace, kind, source, base_url, tool_count, document, created_at, updated_at, revision, search_index) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, (SELECT version FROM catalog_versions WHERE org_id = ?1), ?9) \
                     ON CONFLICT (org_id, namespace) DO UPDATE SET kind = ?3, source = ?4, base_url = ?5, tool_count = ?6, document = ?7, updated_at = ?8, revision = excluded.revision, search_index = ?9",
                    params![r.org_id, r.namespace, r.kind, r.source, r.base_url, r.tool_count, pack(&r.document), r.updated_at_ms, r.search_index],
                )?;
                Ok(())
            })
            .await
    }

    async fn integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
    ) -> StoreResult<Option<IntegrationDocument>> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT document, search_index FROM integrations WHERE org_id = ?1 AND namespace = ?2 AND revision = ?3",
            )?;
            let mut rows = stmt.query(params![org_id, namespace, revision])?;
            Ok(match rows.next()? {
                Some(row) => Some(IntegrationDocument {
                    document: row.get::<_, Document>(0)?.0,
                    search_index: row.get(1)?,
                }),
                None => None,
            })
        })
    }

    async fn replace_search_index(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        search_index: Vec<u8>,
    ) -> StoreResult<bool> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.writer
            .write(move |conn| {
                let changed = conn.execute(
                    "UPDATE integrations SET search_index = ?4 WHERE org_id = ?1 AND namespace = ?2 AND revision = ?3",
                    params![org_id, namespace, revision, search_index],
                )?;
                Ok(changed == 1)
            })
            .await
    }

    async fn replace_integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        document: String,
    ) -> StoreResult<bool> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.writer
            .write(move |conn| {
                let changed = conn.execute(
                    "UPDATE integrations SET document = ?4 WHERE org_id = ?1 AND namespace = ?2 AND revision = ?3",
                    params![org_id, namespace, revision, pack(&document)],
                )?;
                Ok(changed == 1)
            })
            .await
    }

    async fn list_integrations(
        &self,
        org_id: &str,
        with_documents: bool,
    ) -> StoreResult<Vec<IntegrationRecord>> {
        let org_id = org_id.to_string();
        self.read(move |conn| {
            let sql = if with_documents {
                "SELECT org_id, namespace, kind, source, base_url, tool_count, document, updated_at, revision FROM integrations WHERE org_id = ?1 ORDER BY namespace"
            } else {
                "SELECT org_id, namespace, kind, source, base_url, tool_count, '', updated_at, revision FROM integrations WHERE org_id = ?1 ORDER BY namespace"
            };
            let mut stmt = conn.prepare_cached(sql)?;
            let rows = stmt.query_map([org_id], |r| {
                Ok(IntegrationRecord {
                    org_id: r.get(0)?,
                    namespace: r.get(1)?,
                    kind: r.get(2)?,
                    source: r.get(3)?,
                    base_url: r.get(4)?,
                    tool_count: r.get(5)?,
                    document: r.get::<_, Document>(6)?.0,
                    updated_at_ms: r.get(7)?,
                    revision: r.get(8)?,
                    search_index: None,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn remove_integration(&self, org_id: &str, namespace: &str) -> StoreResult<bool> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.writer
            .write(move |conn| {
                let n = conn.execute(
                    "DELETE FROM integrations WHERE org_id = ?1 AND namespace = ?2",
                    params![org_id, namespace],
                )?;
                if n > 0 {
                    bump_catalog_version(conn, &org_id)?;
                }
                Ok(n > 0)
            })
            .await
    }

    async fn catalog_version(&self, org_id: &str) -> StoreResult<i64> {
        let org_id = org_id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT version FROM catalog_versions WHERE org_id = ?1")?
                .query_row([org_id], |r| r.get(0))
                .optional()?
                .unwrap_or(0))
        })
    }
}
