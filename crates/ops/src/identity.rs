//! Who an operation from a shell acts for, the same for every command.

use crate::{Actor, OpError, OpResult, Operations};

/// The account a fresh data dir's first command acts as.
pub const LOCAL_OPERATOR: &str = "local@localhost";

/// How a shell names whom it acts for (`--email`, `--org`, or neither).
#[derive(Debug, Clone, Default)]
pub struct ActorChoice {
    pub email: Option<String>,
    pub org: Option<String>,
}

impl Operations {
    /// Who a command acts for (issue 37: `call` and `mcp` acted for
    /// `local@localhost` by default, which made a second org beside the
    /// one `token create` had made, after which every catalog command asked
    /// for `--org`):
    /// - an email (with or without an org): that account, in its personal
    ///   org or the org named; made if missing, as `token create` would;
    /// - an org alone: that org, which must exist, by its owner or earliest
    ///   member;
    /// - neither: the only org, likewise; on a fresh data dir the local
    ///   operator ([`LOCAL_OPERATOR`]) and its personal org are made, so
    ///   the first command works without a token; with several orgs one
    ///   must be named.
    pub async fn resolve_actor(&self, choice: &ActorChoice) -> OpResult<Actor> {
        let store = self.store();
        if let Some(email) = &choice.email {
            return Ok(store.ensure_account(email, choice.org.as_deref()).await?);
        }
        let org_id = match &choice.org {
            Some(name) => store.find_org(name).await?.ok_or_else(|| {
                OpError::invalid(
                    "org",
                    format!("no org named {name:?}: see `executor token create --org`"),
                )
            })?,
            None => {
                let orgs = store.list_orgs().await?;
                match orgs.as_slice() {
                    [(id, _)] => id.clone(),
                    [] => return Ok(store.ensure_account(LOCAL_OPERATOR, None).await?),
                    many => {
                        let names: Vec<&str> = many.iter().map(|(_, n)| n.as_str()).collect();
                        return Err(OpError::invalid(
                            "org",
                            format!(
                                "several orgs exist ({}): name one with --org (or EXECUTOR_ORG)",
                                names.join(", ")
                            ),
                        ));
                    }
                }
            }
        };
        store.org_account(&org_id).await?.ok_or_else(|| {
            OpError::invalid(
                "org",
                "the org has no member to act as: name an account with --email",
            )
        })
    }

    /// The name of the actor's org, for a surface that says whom it acts for.
    pub async fn org_name(&self, actor: &Actor) -> OpResult<String> {
        let orgs = self.store().list_orgs().await?;
        Ok(orgs
            .into_iter()
            .find(|(id, _)| *id == actor.org_id)
            .map_or_else(|| actor.org_id.clone(), |(_, name)| name))
    }
}

/// An org an account belongs to.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrgInfo {
    pub id: String,
    pub name: String,
}

impl Operations {
    /// The orgs the actor's account belongs to, by name.
    pub async fn account_orgs(&self, actor: &Actor) -> OpResult<Vec<OrgInfo>> {
        Ok(self
            .store()
            .account_orgs(&actor.account_id)
            .await?
            .into_iter()
            .map(|(id, name)| OrgInfo { id, name })
            .collect())
    }
}
