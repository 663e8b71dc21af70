//! Text from the document, trimmed and bounded before it is kept.

/// `text` trimmed and cut to at most `max_chars` characters, the last of
/// which is `…` when something was cut.
pub(crate) fn bounded(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some(_) => {
            let keep = max_chars.saturating_sub(1);
            let mut out: String = text.chars().take(keep).collect();
            out.truncate(out.trim_end().len());
            out.push('…');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_cuts_on_char_boundaries() {
        assert_eq!(bounded("  hi \n", 10), "hi");
        assert_eq!(bounded("abcdef", 6), "abcdef");
        assert_eq!(bounded("abcdefg", 6), "abcde…");
        assert_eq!(bounded("ééééééé", 3), "éé…");
        assert_eq!(bounded("ab  cd", 4), "ab…");
        assert_eq!(bounded("abc", 0), "…");
    }
}
