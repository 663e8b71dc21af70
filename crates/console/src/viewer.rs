//! Who is looking: the [`Viewer`] extractor (a signed-in browser, else a
//! redirect to sign-in that comes back), and [`Posted`], the extractor of
//! every form a page posts: it holds the viewer and the form's fields, and
//! exists only when the form carried the session's CSRF token and a
//! same-origin `Origin` (SPEC §14). A handler that changes anything takes
//! a `Posted`, so it cannot forget the check.

use axum::extract::{Form, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use executor_ops::Actor;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::ConsoleState;
use crate::error::ConsoleError;

/// A signed-in browser, acting for an account in an org.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub actor: Actor,
    /// The session's CSRF token: every form carries it.
    pub csrf: String,
    /// This server's base URL as the request names it (links, the MCP URL).
    pub base: String,
    /// The public URL's path ("" or "/base"): every link starts with it.
    pub prefix: String,
    session: executor_authz::SignedIn,
}

impl Viewer {
    /// A console URL: `path` ("/console/…") under the public URL's path.
    pub fn href(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    /// The console session's hash (what the store keys it by).
    pub fn session_hash(&self) -> &[u8] {
        self.session.session_hash()
    }

    /// Whether the session still lasts (a long stream asks again: signed
    /// out, lapsed or its pasted API token revoked ends it). A store that
    /// cannot be read keeps the stream; the next look decides.
    pub async fn still_signed_in(&self, state: &ConsoleState) -> bool {
        !matches!(
            state
                .ops
                .store()
                .find_console_session(self.session_hash())
                .await,
            Ok(None)
        )
    }
}

impl FromRequestParts<ConsoleState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &ConsoleState) -> Result<Self, Response> {
        let secure = state.public.is_https();
        let prefix = state.public.path().to_string();
        match executor_authz::signed_in(state.ops.store(), &parts.headers, secure).await {
            Ok(Some(session)) => Ok(Viewer {
                actor: session.principal.clone(),
                csrf: session.csrf.clone(),
                base: state.public.for_request(&parts.headers),
                prefix,
                session,
            }),
            Ok(None) => {
                let here = parts
                    .uri
                    .path_and_query()
                    .map_or("/console", |p| p.as_str());
                let mut query = form_urlencoded::Serializer::new(String::new());
                query.append_pair("next", &format!("{prefix}{here}"));
                Err(
                    Redirect::to(&format!("{prefix}/console/login?{}", query.finish()))
                        .into_response(),
                )
            }
            Err(e) => Err(ConsoleError::Unavailable(e.to_string()).into_response()),
        }
    }
}

/// A form a console page posted, with its viewer; only built when the
/// form carried the session's CSRF token (field `csrf`) and the request
/// came from this server's own origin.
pub struct Posted<T> {
    pub viewer: Viewer,
    pub form: T,
}

#[derive(Deserialize)]
struct WithCsrf<T> {
    #[serde(default)]
    csrf: String,
    #[serde(flatten)]
    fields: T,
}

impl<T: DeserializeOwned + Send> FromRequest<ConsoleState> for Posted<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &ConsoleState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let viewer = Viewer::from_request_parts(&mut parts, state).await?;
        let same_origin = executor_authz::same_origin(&parts.headers, &viewer.base);
        let request = Request::from_parts(parts, body);
        let Form(posted) = Form::<WithCsrf<T>>::from_request(request, state)
            .await
            .map_err(|e| ConsoleError::BadForm(e.body_text()).into_response())?;
        let signed = viewer.session.csrf_matches(&posted.csrf);
        if !same_origin || !signed {
            return Err(ConsoleError::Forged.into_response());
        }
        Ok(Posted {
            viewer,
            form: posted.fields,
        })
    }
}

#[derive(Deserialize)]
pub(crate) struct OrgChoice {
    org: String,
    #[serde(default)]
    back: String,
}

/// The org switcher: the session acts for another org of its account.
pub(crate) async fn switch_org(
    axum::extract::State(state): axum::extract::State<ConsoleState>,
    posted: Posted<OrgChoice>,
) -> Result<Redirect, ConsoleError> {
    let Posted { viewer, form } = posted;
    let orgs = state.ops.account_orgs(&viewer.actor).await?;
    if !orgs.iter().any(|o| o.id == form.org) {
        return Err(ConsoleError::NotFound("that org".into()));
    }
    state
        .ops
        .store()
        .set_console_session_org(viewer.session.session_hash(), &form.org)
        .await
        .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
    let back = if form.back.starts_with(&format!("{}/console", viewer.prefix)) {
        form.back
    } else {
        viewer.href("/console")
    };
    Ok(Redirect::to(&back))
}

/// A multipart form a console page posted (an upload): its text fields by
/// name and its one file, with its viewer; only built when it carried the
/// session's CSRF token and came from this server's own origin.
pub struct PostedUpload {
    pub viewer: Viewer,
    pub fields: std::collections::HashMap<String, String>,
    /// The file field's bytes, when one was chosen.
    pub file: Option<Vec<u8>>,
}

impl PostedUpload {
    /// A text field, trimmed; "" when absent.
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", |v| v.trim())
    }
}

impl FromRequest<ConsoleState> for PostedUpload {
    type Rejection = Response;

    async fn from_request(request: Request, state: &ConsoleState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let viewer = Viewer::from_request_parts(&mut parts, state).await?;
        if !executor_authz::same_origin(&parts.headers, &viewer.base) {
            return Err(ConsoleError::Forged.into_response());
        }
        let request = Request::from_parts(parts, body);
        let mut multipart = axum::extract::Multipart::from_request(request, state)
            .await
            .map_err(|e| ConsoleError::BadForm(e.body_text()).into_response())?;
        let mut fields = std::collections::HashMap::new();
        let mut file = None;
        loop {
            let field = match multipart.next_field().await {
                Ok(Some(field)) => field,
                Ok(None) => break,
                Err(e) => return Err(ConsoleError::BadForm(e.body_text()).into_response()),
            };
            let name = field.name().unwrap_or_default().to_string();
            let is_file = field.file_name().is_some();
            let bytes = field
                .bytes()
                .await
                .map_err(|e| ConsoleError::BadForm(e.body_text()).into_response())?;
            if is_file {
                if !bytes.is_empty() {
                    file = Some(bytes.to_vec());
                }
            } else {
                fields.insert(name, String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        let csrf = fields.get("csrf").map_or("", String::as_str);
        if !viewer.session.csrf_matches(csrf) {
            return Err(ConsoleError::Forged.into_response());
        }
        Ok(PostedUpload {
            viewer,
            fields,
            file,
        })
    }
}
