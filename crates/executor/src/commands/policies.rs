//! `executor policies …`: the org's policy rules.

use executor_engine::policy::{Pattern, PolicyAction};
use executor_store::{PolicyRecord, Store, now_ms, tokens};

use super::resolve_org;
use crate::AnyResult;
use crate::cli::PoliciesCommand;

pub(crate) async fn policies(store: &dyn Store, command: PoliciesCommand) -> AnyResult<()> {
    match command {
        PoliciesCommand::Add {
            pattern,
            action,
            position,
            org,
        } => {
            let org_id = resolve_org(store, &org).await?;
            // Validated on save (SPEC §9): a bad rule never reaches the store.
            pattern.parse::<Pattern>()?;
            let action = PolicyAction::from_input(&action)?;
            let record = store
                .add_policy(PolicyRecord {
                    id: format!("pol_{}", tokens::random_id(9)),
                    org_id,
                    pattern: pattern.trim().to_string(),
                    action,
                    position: position.unwrap_or(i64::MAX),
                    created_at_ms: now_ms(),
                })
                .await?;
            println!(
                "{}\t{}\t{}\t{}",
                record.id, record.position, record.pattern, record.action
            );
            Ok(())
        }
        PoliciesCommand::List { org } => {
            let org_id = resolve_org(store, &org).await?;
            for r in store.list_policies(&org_id).await? {
                println!("{}\t{}\t{}\t{}", r.id, r.position, r.pattern, r.action);
            }
            Ok(())
        }
        PoliciesCommand::Remove { id, org } => {
            let org_id = resolve_org(store, &org).await?;
            if store.remove_policy(&org_id, &id).await? {
                Ok(())
            } else {
                Err(format!("no policy {id} in this org").into())
            }
        }
    }
}
