//! `executor policies …`: the org's policy rules.

use executor_ops::{NewPolicy, Operations, Policy};

use super::resolve_actor;
use crate::AnyResult;
use crate::cli::PoliciesCommand;

pub(crate) async fn policies(ops: &Operations, command: PoliciesCommand) -> AnyResult<()> {
    match command {
        PoliciesCommand::Add {
            pattern,
            action,
            position,
            org,
        } => {
            let actor = resolve_actor(ops, &org).await?;
            let input = NewPolicy {
                pattern,
                action,
                position,
            };
            print_rule(&ops.add_policy(&actor, input).await?);
            Ok(())
        }
        PoliciesCommand::List { org } => {
            let actor = resolve_actor(ops, &org).await?;
            for rule in ops.list_policies(&actor).await? {
                print_rule(&rule);
            }
            Ok(())
        }
        PoliciesCommand::Remove { id, org } => {
            let actor = resolve_actor(ops, &org).await?;
            ops.remove_policy(&actor, &id).await?;
            Ok(())
        }
    }
}

fn print_rule(r: &Policy) {
    println!("{}\t{}\t{}\t{}", r.id, r.position, r.pattern, r.action);
}
