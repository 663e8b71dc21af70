//! DELETE `/mcp`: terminates a session, here or on the node that holds
//! it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use executor_store::Principal;

use crate::WireError;
use crate::app::App;
use crate::forward::{RequestParts, acquire_or_hand_over};

pub(crate) async fn delete(
    app: &App,
    principal: Principal,
    session_id: Option<String>,
    request: &RequestParts,
) -> Result<Response, WireError> {
    let session_id = session_id
        .ok_or_else(|| WireError::BadRequest("Mcp-Session-Id header is required".into()))?;
    match acquire_or_hand_over(app, &session_id, &principal, request, Bytes::new()).await? {
        Ok(lease) => app.sessions.terminate_lease(lease).await?,
        Err(answered) => return Ok(answered),
    }
    Ok(StatusCode::OK.into_response())
}
