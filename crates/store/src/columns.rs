//! The column lists both backends select and insert, in the order their
//! row readers take them (`session_from_row`, `execution_from_row`, … in
//! each backend), and the statements whose text both dialects read alike,
//! written once so the two cannot drift apart.

pub(crate) const SESSION_COLUMNS: &str = "id, account_id, org_id, protocol_version, client_info, client_capabilities, elicitation_mode, created_at, last_activity_at, terminated_at";
pub(crate) const EVENT_COLUMNS: &str = "session_id, stream_id, seq, data, undelivered, created_at";
pub(crate) const EXECUTION_COLUMNS: &str = "id, session_id, account_id, org_id, code, status, result, error, logs, tool_calls, started_at, duration_ms";
/// [`EXECUTION_COLUMNS`] as a listing reads them: in the same places, the
/// result, logs and tool calls left out (a listing shows summaries; a
/// record's tool calls alone are kilobytes).
pub(crate) const EXECUTION_LIST_COLUMNS: &str = "id, session_id, account_id, org_id, code, status, CAST(NULL AS TEXT), error, '[]', '[]', started_at, duration_ms";
pub(crate) const TOOL_CALL_COLUMNS: &str = "id, org_id, execution_id, session_id, account_id, tool_path, outcome, error_code, policy_action, policy_rule, approval, decided_by, approval_wait_ms, arg_names, started_at, duration_ms, decided_via";
pub(crate) const TOKEN_COLUMNS: &str =
    "id, secret_hash, account_id, org_id, created_at, expires_at, revoked_at, grant_id";
pub(crate) const CONNECTION_COLUMNS: &str =
    "org_id, namespace, kind, username, secret, updated_at, oauth, generation";
pub(crate) const PENDING_LOGIN_COLUMNS: &str =
    "state_hash, org_id, namespace, sealed, request, created_at, expires_at";
pub(crate) const POLICY_COLUMNS: &str = "id, org_id, pattern, action, position, created_at";
pub(crate) const OAUTH_CLIENT_COLUMNS: &str =
    "id, secret_hash, auth_method, redirect_uris, client_name, origin, created_at, last_used_at";
/// An authorization code's bindings; its state (`used_at`, `replayed_at`,
/// `grant_id`) is read beside them where needed.
pub(crate) const OAUTH_CODE_COLUMNS: &str = "code_hash, client_id, redirect_uri, code_challenge, resource, scope, account_id, org_id, created_at, expires_at";
pub(crate) const OAUTH_GRANT_COLUMNS: &str = "id, client_id, account_id, org_id, scope, resource, redirect_uri, created_at, last_used_at, expires_at, revoked_at";
pub(crate) const LOGIN_LINK_COLUMNS: &str = "link_hash, account_id, org_id, created_at, expires_at";
pub(crate) const CONSOLE_SESSION_COLUMNS: &str =
    "session_hash, account_id, org_id, created_at, last_seen_at, token_id";

/// `org_account`: the org's owner first, else its earliest member (the same
/// text in both dialects: one parameter, written `$1`, which SQLite also
/// reads).
pub(crate) const ORG_ACCOUNT: &str = "SELECT m.account_id FROM memberships m \
     JOIN accounts a ON a.id = m.account_id JOIN orgs o ON o.id = m.org_id \
     WHERE m.org_id = $1 \
     ORDER BY CASE WHEN o.owner_account_id = m.account_id THEN 0 ELSE 1 END, a.created_at, a.id \
     LIMIT 1";
