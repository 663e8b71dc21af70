//! The API's own extractors: a JSON body, a query and a path segment whose
//! refusals are problems naming the field at fault, not axum's plain-text
//! rejections.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON request body.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                let essence = v.split(';').next().unwrap_or("").trim();
                essence.eq_ignore_ascii_case("application/json")
            });
        if !is_json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON, with Content-Type: application/json",
            ));
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), "unreadable_body", e.body_text()))?;
        // Every body of this API is an object (serde would also read a
        // struct from an array, which the document does not allow).
        let json: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::invalid("body", format!("the body is not JSON: {e}")))?;
        if !json.is_object() {
            return Err(ApiError::invalid("body", "the body is a JSON object"));
        }
        let value = serde_path_to_error::deserialize(json).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "body".to_string()
            } else {
                path
            };
            ApiError::invalid(field, e.inner().to_string())
        })?;
        Ok(Body(value))
    }
}

/// A query string.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        // A NUL cannot be stored or compared by Postgres (its text refuses
        // it), so it is refused here, naming the parameter, on both stores.
        if let Some((name, _)) =
            form_urlencoded::parse(query.as_bytes()).find(|(_, value)| value.contains('\0'))
        {
            return Err(ApiError::invalid(
                name.into_owned(),
                "a query parameter must not contain a NUL character",
            ));
        }
        let decoder = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        let value = serde_path_to_error::deserialize(decoder).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                "query".to_string()
            } else {
                path
            };
            ApiError::invalid(field, e.inner().to_string())
        })?;
        Ok(Params(value))
    }
}

/// An optional whole number that JSON may write as `3` or `3.0` (JSON
/// Schema's `integer` admits both; serde's integers only the first).
pub fn whole_number<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    use serde::Deserialize as _;
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let whole = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
            .map(|f| f as u64)
    });
    let out_of_range =
        || serde::de::Error::custom(format!("{number} is not a whole number in range"));
    let whole = whole.ok_or_else(out_of_range)?;
    T::try_from(whole).map(Some).map_err(|_| out_of_range())
}

/// A whole number that JSON may write as `3` or `3.0`.
pub fn whole<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    whole_number(deserializer)?.ok_or_else(|| serde::de::Error::custom("a number is required"))
}

/// The one `{…}` segment of a route's path.
pub struct Segment(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Segment {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(segment) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::invalid("path", e.body_text()))?;
        Ok(Segment(segment))
    }
}

/// The two `{…}` segments of a route's path, in order.
pub struct Segments(pub String, pub String);

impl<S: Send + Sync> FromRequestParts<S> for Segments {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path((first, second)) =
            axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::invalid("path", e.body_text()))?;
        Ok(Segments(first, second))
    }
}
