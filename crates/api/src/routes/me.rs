//! `/me`: who the token acts for.

use axum::Json;
use axum::extract::State;
use executor_ops::OrgInfo;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(me))
}

/// The caller: its account, the org everything it does acts in, and the
/// orgs the account belongs to.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub account_id: String,
    pub org_id: String,
    pub org_name: String,
    /// Every org the account belongs to (a token acts in one of them).
    pub orgs: Vec<OrgInfo>,
    /// The token this request came with.
    pub token_id: String,
}

#[utoipa::path(get, path = "/me", tag = "me",
    responses(
        (status = 200, description = "Who the token acts for", body = Me),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn me(State(state): State<ApiState>, caller: Caller) -> ApiResult<Json<Me>> {
    let org_name = state.ops.org_name(&caller.actor).await?;
    let orgs = state.ops.account_orgs(&caller.actor).await?;
    Ok(Json(Me {
        orgs,
        account_id: caller.actor.account_id,
        org_id: caller.actor.org_id,
        org_name,
        token_id: caller.token_id,
    }))
}
