//! Turns what an agent sent into an async function body (SPEC §5).

/// Trims the code and, when it contains a fenced block, keeps the first
/// block's contents (agents often wrap code in prose).
pub fn normalize(code: &str) -> String {
    let trimmed = code.trim();
    match first_fenced_block(trimmed) {
        Some(block) => block.trim().to_string(),
        None => trimmed.to_string(),
    }
}

fn first_fenced_block(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after_fence = &text[open + 3..];
    // The info string (```ts, ```javascript) runs to the end of the line.
    let body_start = after_fence.find('\n').map(|i| i + 1)?;
    let body = &after_fence[body_start..];
    let close = body.find("```")?;
    Some(&body[..close])
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn trims_and_extracts_the_first_fenced_block() {
        assert_eq!(normalize("  return 1;  "), "return 1;");
        assert_eq!(
            normalize("Here:\n```ts\nreturn 2;\n```\nand\n```js\nreturn 3;\n```"),
            "return 2;"
        );
        assert_eq!(normalize("```\nreturn 4;\n```"), "return 4;");
        // An unterminated fence is left as it is.
        assert_eq!(normalize("```js\nreturn 5;"), "```js\nreturn 5;");
    }
}
