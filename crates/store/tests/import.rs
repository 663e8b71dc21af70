//! `executor migrate`'s copy: everything an embedded store holds reads back
//! the same from Postgres; a copy that cannot be whole is not made at all.

use executor_store::secrets::{SecretKey, connection_aad, open, seal};
use executor_store::testing::{PgTestDb, sqlite_store};
use executor_store::*;

fn key(byte: u8) -> SecretKey {
    SecretKey::from_env_value(&format!("{byte:02x}").repeat(32)).unwrap()
}

/// A store with a row in every table the copy moves.
async fn filled(store: &dyn Store, key: &SecretKey) -> Principal {
    let owner = store
        .ensure_account("mig@m.test", Some("team"))
        .await
        .unwrap();
    store.ensure_account("mig@m.test", None).await.unwrap();
    store
        .insert_token(TokenRecord {
            id: "tok_m".into(),
            secret_hash: vec![9; 32],
            principal: owner.clone(),
            created_at_ms: 1,
            expires_at_ms: None,
            revoked_at_ms: Some(2),
            grant_id: None,
        })
        .await
        .unwrap();
    store
        .insert_session(
            SessionRecord {
                id: "sess_m".into(),
                owner: owner.clone(),
                protocol_version: "2025-06-18".into(),
                client_info: serde_json::json!({"name": "c"}),
                client_capabilities: serde_json::json!({}),
                elicitation_mode: ElicitationMode::Model,
                created_at_ms: 3,
                last_activity_at_ms: 4,
                terminated_at_ms: None,
            },
            "node_test",
        )
        .await
        .unwrap();
    for seq in 1..=3 {
        store
            .append_event(
                EventRecord {
                    session_id: "sess_m".into(),
                    stream_id: "st".into(),
                    seq,
                    data: format!("{{\"n\":{seq}}}"),
                    undelivered: seq == 3,
                    created_at_ms: seq,
                },
                LogBounds::default(),
                None,
            )
            .await
            .unwrap();
    }
    store
        .insert_execution(ExecutionRecord {
            id: "exec_m".into(),
            session_id: Some("sess_m".into()),
            account_id: owner.account_id.clone(),
            org_id: owner.org_id.clone(),
            code: "return '\0'".into(),
            status: ExecutionStatus::WaitingForInteraction,
            result: None,
            error: None,
            logs: vec!["l".into()],
            tool_calls: Vec::new(),
            started_at_ms: 5,
            duration_ms: 6,
        })
        .await
        .unwrap();
    store
        .add_policy(PolicyRecord {
            id: "pol_m".into(),
            org_id: owner.org_id.clone(),
            pattern: "api.*".into(),
            action: PolicyAction::Block,
            position: 0,
            created_at_ms: 7,
        })
        .await
        .unwrap();
    store
        .save_execution_state("exec_m", &owner.org_id, "{\"paused\":true}".into(), None)
        .await
        .unwrap();
    store
        .post_execution_decision("exec_m", "accept")
        .await
        .unwrap();
    store
        .upsert_integration(IntegrationRecord {
            org_id: owner.org_id.clone(),
            namespace: "api".into(),
            kind: "openapi".into(),
            source: "spec.json".into(),
            base_url: None,
            tool_count: 1,
            document: "{\"format\":2,\"tools\":[]}".into(),
            updated_at_ms: 8,
            revision: 0,
            search_index: Some(vec![4, 5]),
        })
        .await
        .unwrap();
    let sealed = seal(key, "s3cret", &connection_aad(&owner.org_id, "api")).unwrap();
    store
        .set_connection(ConnectionRecord {
            org_id: owner.org_id.clone(),
            namespace: "api".into(),
            kind: CredentialKind::Bearer,
            username: None,
            secret: sealed,
            updated_at_ms: 9,
            oauth: None,
            generation: 0,
        })
        .await
        .unwrap();
    // The built-in authorization server: a client and a grant made of a
    // code, with its tokens; browser sign-in.
    store
        .insert_oauth_client(OAuthClientRecord {
            id: "cl_m".into(),
            secret_hash: Some(vec![4; 32]),
            auth_method: "client_secret_post".into(),
            redirect_uris: vec!["https://app.test/cb".into()],
            client_name: Some("Migrated".into()),
            origin: OAuthClientOrigin::Preregistered,
            created_at_ms: 10,
            last_used_at_ms: None,
        })
        .await
        .unwrap();
    let code = OAuthCodeRecord {
        code_hash: vec![5; 32],
        client_id: "cl_m".into(),
        redirect_uri: "https://app.test/cb".into(),
        code_challenge: "challenge".into(),
        resource: "https://executor.test/mcp".into(),
        scope: "mcp".into(),
        principal: owner.clone(),
        created_at_ms: 11,
        expires_at_ms: i64::MAX,
    };
    store.insert_oauth_code(code.clone()).await.unwrap();
    assert!(matches!(
        store.take_oauth_code(&code.code_hash, 12).await.unwrap(),
        CodeTake::Fresh(_)
    ));
    assert!(
        store
            .create_oauth_grant(&code.code_hash, migrated_grant(&owner), migrated_tokens())
            .await
            .unwrap()
    );
    store
        .insert_console_session(ConsoleSessionRecord {
            session_hash: vec![8; 32],
            principal: owner.clone(),
            created_at_ms: 14,
            last_seen_at_ms: 15,
            token_id: Some("tok1".into()),
        })
        .await
        .unwrap();
    store.flush().await.unwrap();
    owner
}

fn migrated_grant(owner: &Principal) -> OAuthGrantRecord {
    OAuthGrantRecord {
        id: "gr_m".into(),
        client_id: "cl_m".into(),
        principal: owner.clone(),
        scope: "mcp".into(),
        resource: "https://executor.test/mcp".into(),
        redirect_uri: "https://app.test/cb".into(),
        created_at_ms: 13,
        last_used_at_ms: 13,
        expires_at_ms: i64::MAX,
        revoked_at_ms: None,
    }
}

fn migrated_tokens() -> IssuedTokens {
    IssuedTokens {
        access_id: "oat_m".into(),
        access_hash: vec![6; 32],
        access_expires_at_ms: i64::MAX,
        refresh_hash: vec![7; 32],
        refresh_expires_at_ms: i64::MAX,
        issued_at_ms: 13,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_reads_back_the_same_from_postgres() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let (sqlite, dir) = sqlite_store();
    let key = key(7);
    let owner = filled(sqlite.as_ref(), &key).await;
    // A document as an earlier release stored it: plain TEXT.
    {
        let conn = rusqlite::Connection::open(dir.path().join("executor.db")).unwrap();
        conn.execute(
            "INSERT INTO integrations (org_id, namespace, kind, source, base_url, tool_count, document, created_at, updated_at, revision) \
             VALUES (?1, 'old', 'openapi', 'old.json', NULL, 0, '{\"format\":1}', 1, 1, 0)",
            [&owner.org_id],
        )
        .unwrap();
    }
    let pg = db.store().await;
    let report = pg
        .import_sqlite(&dir.path().join("executor.db"), &key)
        .await
        .unwrap();
    let count = |table: &str| {
        report
            .tables
            .iter()
            .find(|(name, _)| name == table)
            .map(|(_, n)| *n)
    };
    assert_eq!(count("events"), Some(3));
    assert_eq!(count("integrations"), Some(2));
    assert_eq!(count("orgs"), Some(2));

    let (a, b): (&dyn Store, &dyn Store) = (sqlite.as_ref(), pg.as_ref());
    assert_eq!(a.list_orgs().await.unwrap(), b.list_orgs().await.unwrap());
    assert_eq!(
        b.ensure_account("mig@m.test", Some("team")).await.unwrap(),
        owner,
        "the same account and org, found again"
    );
    let token = b.find_token("tok_m").await.unwrap().unwrap();
    assert_eq!(
        (token.secret_hash, token.revoked_at_ms),
        (vec![9; 32], Some(2))
    );
    assert_eq!(
        a.get_session("sess_m").await.unwrap(),
        b.get_session("sess_m").await.unwrap()
    );
    assert_eq!(
        a.events_after("sess_m", "st", 0).await.unwrap(),
        b.events_after("sess_m", "st", 0).await.unwrap()
    );
    let execution = b.get_execution("exec_m").await.unwrap().unwrap();
    assert_eq!(
        execution.code, "return '\u{FFFD}'",
        "NUL, which Postgres refuses"
    );
    assert_eq!(
        a.list_policies(&owner.org_id).await.unwrap(),
        b.list_policies(&owner.org_id).await.unwrap()
    );
    assert_eq!(
        b.take_execution_decision("exec_m")
            .await
            .unwrap()
            .as_deref(),
        Some("accept"),
        "a posted decision travels with the paused run"
    );
    assert_eq!(
        b.load_execution_state("exec_m").await.unwrap().as_deref(),
        Some("{\"paused\":true}")
    );
    let listed = b.list_integrations(&owner.org_id, true).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(
        listed[1].document, "{\"format\":1}",
        "TEXT document packed on the way"
    );
    assert_eq!(
        a.catalog_version(&owner.org_id).await.unwrap(),
        b.catalog_version(&owner.org_id).await.unwrap()
    );
    let connection = b
        .get_connection(&owner.org_id, "api")
        .await
        .unwrap()
        .unwrap();
    let opened = open(
        &key,
        &connection.secret,
        &connection_aad(&owner.org_id, "api"),
    )
    .unwrap();
    assert_eq!(opened.expose(), "s3cret");
    // MCP clients stay signed in: the grant, its client and its tokens
    // travel, and the refresh token still rotates; so does a browser.
    assert_eq!(
        b.find_oauth_grant("gr_m").await.unwrap(),
        Some(migrated_grant(&owner))
    );
    assert_eq!(
        a.find_oauth_client("cl_m").await.unwrap(),
        b.find_oauth_client("cl_m").await.unwrap()
    );
    let access = b.find_token("oat_m").await.unwrap().unwrap();
    assert_eq!(access.grant_id.as_deref(), Some("gr_m"));
    assert!(
        b.list_tokens(&owner.org_id)
            .await
            .unwrap()
            .iter()
            .all(|t| !t.is_oauth())
    );
    let refreshed = b
        .refresh_oauth_grant(
            RefreshUse {
                token_hash: vec![7; 32],
                client_id: "cl_m".into(),
                at_ms: 16,
                grace_ms: 60_000,
            },
            IssuedTokens {
                access_id: "oat_m2".into(),
                access_hash: vec![9; 32],
                refresh_hash: vec![10; 32],
                issued_at_ms: 16,
                ..migrated_tokens()
            },
        )
        .await
        .unwrap();
    assert!(refreshed.is_ok(), "{refreshed:?}");
    assert_eq!(
        b.take_oauth_code(&[5; 32], 20).await.unwrap(),
        CodeTake::Replayed,
        "a used code stays used"
    );
    for token in ["oat_m", "oat_m2"] {
        assert_eq!(
            b.find_token(token).await.unwrap().unwrap().revoked_at_ms,
            Some(20),
            "and its replay revokes what it issued: {token}"
        );
    }
    assert_eq!(
        a.find_console_session(&[8; 32]).await.unwrap(),
        b.find_console_session(&[8; 32]).await.unwrap()
    );
    assert_eq!(count("oauth_refresh_tokens"), Some(1));
    // The store's key check is the copy's key.
    pg.check_secret_key(&key).await.unwrap();
    assert!(pg.check_secret_key(&self::key(8)).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_or_a_used_target_copies_nothing() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let (sqlite, dir) = sqlite_store();
    filled(sqlite.as_ref(), &key(7)).await;
    let pg = db.store().await;
    let path = dir.path().join("executor.db");
    let wrong = pg
        .import_sqlite(&path, &key(8))
        .await
        .unwrap_err()
        .to_string();
    assert!(wrong.contains("team/api"), "{wrong}");
    assert!(pg.list_orgs().await.unwrap().is_empty(), "nothing copied");

    pg.ensure_account("someone@else.test", None).await.unwrap();
    let used = pg
        .import_sqlite(&path, &key(7))
        .await
        .unwrap_err()
        .to_string();
    assert!(used.contains("already holds data"), "{used}");
    // Issue 37: the message named a `--to` flag that does not exist.
    assert!(
        used.contains("--database-url") && !used.contains("--to "),
        "{used}"
    );
    assert_eq!(pg.list_orgs().await.unwrap().len(), 1);
}

/// Issue 37: `migrate` copied a store a server was still serving, whose
/// writes after the copy were then lost. Refused, naming the server, until
/// it has stopped (its node retired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_a_server_still_serves_is_not_copied() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let (sqlite, dir) = sqlite_store();
    filled(sqlite.as_ref(), &key(7)).await;
    let serving: &dyn Store = sqlite.as_ref();
    serving
        .register_node("node_serving", Some("http://127.0.0.1:4788"), 60_000)
        .await
        .unwrap();
    // A CLI command's node has no address: it is no server.
    serving
        .register_node("node_cli", None, 60_000)
        .await
        .unwrap();
    let pg = db.store().await;
    let path = dir.path().join("executor.db");
    let refused = pg
        .import_sqlite(&path, &key(7))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("still serving") && refused.contains("http://127.0.0.1:4788"),
        "{refused}"
    );
    assert!(pg.list_orgs().await.unwrap().is_empty(), "nothing copied");
    serving.retire_node("node_serving").await.unwrap();
    pg.import_sqlite(&path, &key(7)).await.unwrap();
    assert!(
        !pg.list_orgs().await.unwrap().is_empty(),
        "copied once stopped"
    );
}
