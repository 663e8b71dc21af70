//! One module per console section; each handler reads through the
//! operations layer and renders with `maud`, through `layout::page`.

pub(crate) mod activity;
pub mod approvals;
pub(crate) mod clients;
pub(crate) mod connect;
pub(crate) mod executions;
pub(crate) mod integrations;
pub(crate) mod policies;
pub(crate) mod setup;

use chrono::{DateTime, NaiveDate};
use maud::{Markup, html};

use crate::error::ConsoleError;
use crate::viewer::Viewer;

/// A filter's text as typed, trimmed; None when empty.
pub(crate) fn given(text: &str) -> Option<String> {
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

/// A time filter as typed: empty (none), a day (`2026-12-06`, its start
/// in UTC) or an RFC 3339 time; anything else is the form's error.
pub(crate) fn parse_time_filter(field: &str, text: &str) -> Result<Option<i64>, ConsoleError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        && let Some(start) = day.and_hms_opt(0, 0, 0)
    {
        return Ok(Some(start.and_utc().timestamp_millis()));
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| Some(t.timestamp_millis()))
        .map_err(|_| {
            ConsoleError::BadForm(format!(
                "{field} must be a day (2026-12-06) or a time (2026-12-06T15:04:05Z)"
            ))
        })
}

/// The link to a list's next page, keeping its filters.
pub(crate) fn pager(
    viewer: &Viewer,
    path: &str,
    filters: &[(&str, &str)],
    next: Option<&str>,
) -> Markup {
    let Some(next) = next else {
        return html! {};
    };
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in filters.iter().filter(|(_, v)| !v.is_empty()) {
        query.append_pair(name, value);
    }
    query.append_pair("cursor", next);
    html! {
        nav.pager aria-label="Pages" {
            a href={ (viewer.href(path)) "?" (query.finish()) } rel="next" { "Older →" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_filter_is_a_day_or_a_time() {
        assert_eq!(parse_time_filter("since", "").unwrap(), None);
        assert_eq!(
            parse_time_filter("since", "1970-01-02").unwrap(),
            Some(86_400_000)
        );
        assert_eq!(
            parse_time_filter("since", "1970-01-01T00:00:01Z").unwrap(),
            Some(1_000)
        );
        assert!(parse_time_filter("since", "yesterday").is_err());
    }
}
