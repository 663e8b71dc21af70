//! What both stores share of the session lease (SPEC §10): why a claim
//! failed, read from the row it could not take.

use crate::{ExecutionClaim, NodeRecord, SessionClaim, SessionRecord};

/// The session row a claim could not take, with its holder's liveness and
/// the claimer's own, as read right after the failed claim.
pub(crate) struct ClaimRefusal {
    pub record: SessionRecord,
    pub holder: Option<String>,
    pub holder_url: Option<String>,
    pub holder_alive: bool,
    pub caller_alive: bool,
}

impl ClaimRefusal {
    /// The claim's answer for `caller`; None when the row, read after the
    /// claim, would have let it through (a holder that lapsed in between):
    /// the caller claims again.
    pub(crate) fn outcome(found: Option<ClaimRefusal>, caller: &str) -> Option<SessionClaim> {
        let Some(found) = found else {
            return Some(SessionClaim::NotFound);
        };
        if found.record.terminated_at_ms.is_some() {
            return Some(SessionClaim::Terminated);
        }
        if !found.caller_alive {
            return Some(SessionClaim::Lapsed);
        }
        match found.holder {
            Some(holder) if holder != caller && found.holder_alive => Some(SessionClaim::Held {
                record: found.record,
                holder: NodeRecord {
                    id: holder,
                    url: found.holder_url,
                },
            }),
            _ => None,
        }
    }
}

/// The execution row a claim could not take.
pub(crate) struct ExecutionRefusal {
    pub holder: Option<String>,
    pub holder_url: Option<String>,
    pub holder_alive: bool,
    pub caller_alive: bool,
}

impl ExecutionRefusal {
    /// As [`ClaimRefusal::outcome`], for a paused execution.
    pub(crate) fn outcome(found: Option<ExecutionRefusal>, caller: &str) -> Option<ExecutionClaim> {
        let Some(found) = found else {
            return Some(ExecutionClaim::NotFound);
        };
        if !found.caller_alive {
            return Some(ExecutionClaim::Lapsed);
        }
        match found.holder {
            Some(holder) if holder != caller && found.holder_alive => Some(ExecutionClaim::Held {
                holder: NodeRecord {
                    id: holder,
                    url: found.holder_url,
                },
            }),
            _ => None,
        }
    }
}
