//! The two schemas hold the same tables and columns: a migration added to
//! one list and not the other fails here, not in production.

use std::collections::{BTreeMap, BTreeSet};

use executor_store::testing::{PgTestDb, sqlite_store};

/// Tables only one store has, by design.
const POSTGRES_ONLY: &[&str] = &["executor_schema", "executor_meta"];
/// SQLite's access revision is a counter row; Postgres notifies instead.
const SQLITE_ONLY: &[&str] = &["revisions"];

type Columns = BTreeMap<String, BTreeSet<String>>;

fn sqlite_columns() -> Columns {
    let (_store, dir) = sqlite_store();
    let conn = rusqlite::Connection::open(dir.path().join("executor.db")).unwrap();
    let mut tables = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap();
    let names: Vec<String> = tables
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    names
        .into_iter()
        .filter(|table| !SQLITE_ONLY.contains(&table.as_str()))
        .map(|table| {
            let mut info = conn
                .prepare("SELECT name FROM pragma_table_info(?1)")
                .unwrap();
            let columns = info
                .query_map([&table], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            (table, columns)
        })
        .collect()
}

#[tokio::test]
async fn sqlite_and_postgres_have_the_same_tables_and_columns() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    drop(db.store().await);
    let (client, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut postgres = Columns::new();
    for row in client
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema()",
            &[],
        )
        .await
        .unwrap()
    {
        let (table, column): (String, String) = (row.get(0), row.get(1));
        if !POSTGRES_ONLY.contains(&table.as_str()) {
            postgres.entry(table).or_default().insert(column);
        }
    }
    assert_eq!(sqlite_columns(), postgres);
}
