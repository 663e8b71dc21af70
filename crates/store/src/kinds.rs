//! The closed sets of words the store keeps as text: each an enum, parsed
//! once where text comes in (SQL rows, JSON, the CLI) and written back with
//! `as_str`, so that the code above the store matches on variants and a
//! new variant makes the compiler list every place that must handle it.

use std::fmt;
use std::str::FromStr;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Text that names no variant of a set (a damaged row, or one written by a
/// newer release).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {set} {value:?}")]
pub struct UnknownValue {
    /// What the set is ("policy action").
    pub set: &'static str,
    pub value: String,
}

/// An enum whose variants are stored as fixed words: `as_str`, `ALL`,
/// `Display`, `FromStr` (exact words only), serde and SQLite conversions.
macro_rules! stored_words {
    (
        $(#[$meta:meta])*
        $name:ident ($set:literal) {
            $($(#[$variant_meta:meta])* $variant:ident = $word:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;

            fn from_str(text: &str) -> Result<Self, UnknownValue> {
                match text {
                    $($word => Ok($name::$variant),)+
                    other => Err(UnknownValue { set: $set, value: other.to_string() }),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                value
                    .as_str()?
                    .parse()
                    .map_err(|e: UnknownValue| FromSqlError::Other(Box::new(e)))
            }
        }
    };
}

stored_words! {
    /// How a session asks a human to approve a call (SPEC §9).
    ElicitationMode ("elicitation mode") {
        /// The agent approves through the `resume` tool.
        Model = "model",
        /// The client shows an MCP elicitation.
        Native = "native",
        /// The human decides in the console; the agent's `resume` waits
        /// for that decision (SPEC §14).
        Console = "console",
    }
}

stored_words! {
    /// Where one run of `execute` ended (or waits).
    ExecutionStatus ("execution status") {
        Completed = "completed",
        Error = "error",
        /// Paused on a call that needs a human's approval.
        WaitingForInteraction = "waiting_for_interaction",
    }
}

stored_words! {
    /// What a policy rule does to a matching call (SPEC §9).
    PolicyAction ("policy action") {
        Allow = "allow",
        RequireApproval = "require_approval",
        Block = "block",
    }
}

impl PolicyAction {
    /// An action as a person types it: any case, `-` for `_`, and the
    /// aliases `approve` and `deny`. The error is the message to show.
    pub fn from_input(text: &str) -> Result<PolicyAction, String> {
        match text.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "approve" => Ok(PolicyAction::RequireApproval),
            "deny" => Ok(PolicyAction::Block),
            word => word.parse().map_err(|_| {
                format!("unknown policy action {word:?}: use allow, require_approval or block")
            }),
        }
    }
}

stored_words! {
    /// How one tool call ended, for the audit trail (SPEC §13). The engine
    /// maps SPEC §7's error codes onto these in one place
    /// (`executor_engine`'s `invoke.rs`, `outcome_of_code`).
    ToolCallOutcome ("tool call outcome") {
        /// The tool answered `{ok: true}`.
        Ok = "ok",
        /// The tool (or its pipeline) answered an error: an upstream 4xx or
        /// 5xx, arguments that did not validate, a missing connection.
        Failed = "failed",
        /// A policy rule (or the tool's default) blocks it.
        Blocked = "blocked",
        /// A human declined (or cancelled) its approval.
        Declined = "declined",
        /// The call, or its approval window, timed out.
        TimedOut = "timed_out",
        /// Anything else: an internal failure, an unreachable integration.
        Error = "error",
    }
}

stored_words! {
    /// What a human decided about a call that needed approval.
    ApprovalDecision ("approval decision") {
        Approved = "approved",
        Declined = "declined",
    }
}

stored_words! {
    /// How a call's approval was decided (SPEC §14: who decided and how).
    ApprovalChannel ("approval channel") {
        /// The agent's `resume` tool.
        Resume = "resume",
        /// The client asked the person (native elicitation).
        Native = "native",
        /// The web console.
        Console = "console",
        /// The management API.
        Api = "api",
        /// `executor resume` at a shell.
        Cli = "cli",
        /// The operator's own call of one tool (`tools/call` over the API,
        /// a tool run from the console): calling it approves it.
        Caller = "caller",
        /// Nobody decided within the approval window.
        Timeout = "timeout",
    }
}

stored_words! {
    /// How a connection's secret is presented to its API.
    CredentialKind ("credential kind") {
        /// Where the integration's security scheme says (header, query or
        /// cookie).
        ApiKey = "api_key",
        Bearer = "bearer",
        Basic = "basic",
        /// Tokens obtained by OAuth (executor-oauth): the sealed secret is
        /// their JSON and `ConnectionRecord::oauth` the rest of the grant.
        OAuth = "oauth",
    }
}

stored_words! {
    /// The kinds of integration this release serves. An integration
    /// record keeps its kind as text and [`crate::IntegrationRecord::kind`]
    /// parses it: a record written by a newer release must still be listed
    /// (and reported), not fail the read of every record beside it.
    IntegrationKind ("integration kind") {
        OpenApi = "openapi",
        Graphql = "graphql",
        /// An upstream MCP server.
        Mcp = "mcp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr<Err = UnknownValue>,
        T: Serialize + for<'de> Deserialize<'de>,
    {
        for &value in all {
            assert_eq!(value.to_string().parse::<T>(), Ok(value));
            let json = serde_json::to_string(&value).unwrap_or_default();
            assert_eq!(json, format!("\"{value}\""));
            assert_eq!(serde_json::from_str::<T>(&json).ok(), Some(value));
        }
    }

    #[test]
    fn every_set_reads_back_what_it_writes() {
        round_trips(ElicitationMode::ALL);
        round_trips(ExecutionStatus::ALL);
        round_trips(PolicyAction::ALL);
        round_trips(CredentialKind::ALL);
        round_trips(ApprovalChannel::ALL);
        round_trips(IntegrationKind::ALL);
        round_trips(ToolCallOutcome::ALL);
        round_trips(ApprovalDecision::ALL);
    }

    #[test]
    fn unknown_words_are_refused_with_their_set() {
        assert_eq!(
            "soap".parse::<IntegrationKind>(),
            Err(UnknownValue {
                set: "integration kind",
                value: "soap".into()
            })
        );
        assert!(serde_json::from_str::<ExecutionStatus>("\"running\"").is_err());
        // Stored words are exact; people's input is lenient.
        assert!("Allow".parse::<PolicyAction>().is_err());
        assert_eq!(
            PolicyAction::from_input(" Require-Approval "),
            Ok(PolicyAction::RequireApproval)
        );
        assert_eq!(PolicyAction::from_input("deny"), Ok(PolicyAction::Block));
        assert!(PolicyAction::from_input("maybe").is_err_and(|e| e.contains("allow")));
    }

    #[test]
    fn sqlite_columns_hold_the_words() -> rusqlite::Result<()> {
        let db = rusqlite::Connection::open_in_memory()?;
        let word: String = db.query_row("SELECT ?1", [CredentialKind::Bearer], |r| r.get(0))?;
        assert_eq!(word, "bearer");
        let kind: CredentialKind = db.query_row("SELECT 'basic'", [], |r| r.get(0))?;
        assert_eq!(kind, CredentialKind::Basic);
        let bad = db.query_row("SELECT 'digest'", [], |r| r.get::<_, CredentialKind>(0));
        assert!(bad.is_err());
        Ok(())
    }
}
