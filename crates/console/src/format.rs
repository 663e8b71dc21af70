//! How values read on a page: times in UTC, durations, cut previews.

use chrono::{DateTime, Utc};

/// `2026-12-06 15:04:05 UTC`, or an em dash for a time that cannot be.
pub fn time(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || "—".into(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// The same instant for a `<time datetime>` attribute.
pub fn machine_time(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(String::new, |t| {
        t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    })
}

/// `850 ms`, `12.4 s`, `3 min 5 s`.
pub fn duration(ms: i64) -> String {
    match ms {
        ..0 => "—".into(),
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A JSON value as indented text (what a `<pre>` shows).
pub fn json(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_a_person_reads_them() {
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(machine_time(1_500), "1970-01-01T00:00:01.500Z");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_400), "12.4 s");
        assert_eq!(duration(185_000), "3 min 5 s");
        assert_eq!(cut("héllo world", 5), "héllo…");
        assert_eq!(cut("short", 10), "short");
    }
}
