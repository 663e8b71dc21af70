//! Where a byte of a JSON text stands — inside a string or not — without
//! parsing it: for sizing an answer before it is parsed and for redacting
//! its text.

/// Fed a JSON text byte by byte, in order.
#[derive(Default)]
pub(crate) struct JsonScan {
    in_string: bool,
    escaped: bool,
}

impl JsonScan {
    /// Takes the next byte; true when it stands outside every string (a
    /// separator, a bracket, part of a number or literal). Quotes count as
    /// inside.
    pub(crate) fn outside(&mut self, b: u8) -> bool {
        if self.in_string {
            match b {
                _ if self.escaped => self.escaped = false,
                b'\\' => self.escaped = true,
                b'"' => self.in_string = false,
                _ => {}
            }
            false
        } else if b == b'"' {
            self.in_string = true;
            false
        } else {
            true
        }
    }

    /// Takes the next bytes.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.outside(b);
        }
    }

    /// Whether the next byte would be inside a string.
    pub(crate) fn in_string(&self) -> bool {
        self.in_string
    }
}

/// Widens byte ranges of a JSON text so that none splits an escape
/// sequence inside a string (`\"`, `\\`, `\u00e9`). Redaction replaces whole
/// ranges; a range that took the backslash of `\"` and left the quote
/// would close the string early. `spans` are sorted and disjoint; the
/// result is too.
pub(crate) fn whole_escapes(text: &[u8], spans: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    let mut escapes = Escapes::default();
    for &(start, end) in spans {
        let start = escapes.advance(text, start).map_or(start, |(s, _)| s);
        let end = escapes
            .advance(text, end)
            .map_or(end, |(_, e)| e.min(text.len()));
        match out.last_mut() {
            Some(last) if last.1 >= start => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// Walks a JSON text once, knowing at each position whether it stands
/// inside an escape sequence of a string.
#[derive(Default)]
struct Escapes {
    at: usize,
    in_string: bool,
    /// The escape being read: where it started and where it ends (known
    /// once the byte after the backslash is seen).
    escape: Option<(usize, Option<usize>)>,
}

impl Escapes {
    /// Moves to `to` (never backwards) and returns the escape sequence that
    /// position `to` falls strictly inside, as (start, end).
    fn advance(&mut self, text: &[u8], to: usize) -> Option<(usize, usize)> {
        while self.at < to.min(text.len()) {
            let b = text[self.at];
            match self.escape {
                Some((start, None)) => {
                    let len = if b == b'u' { 6 } else { 2 };
                    self.escape = Some((start, Some(start + len)));
                }
                Some((_, Some(end))) if self.at < end => {}
                _ => {
                    self.escape = None;
                    if self.in_string {
                        match b {
                            b'\\' => self.escape = Some((self.at, None)),
                            b'"' => self.in_string = false,
                            _ => {}
                        }
                    } else if b == b'"' {
                        self.in_string = true;
                    }
                }
            }
            self.at += 1;
        }
        match self.escape {
            Some((start, None)) if start < to => {
                let len = if text.get(start + 1) == Some(&b'u') {
                    6
                } else {
                    2
                };
                Some((start, start + len))
            }
            Some((start, Some(end))) if start < to && to < end => Some((start, end)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_never_split_an_escape() {
        let text = br#"{"a":"x\"y\u00e9z\\w"}"#;
        // `\"` starts at 7, `\u00e9` at 10, `\\` at 17.
        assert_eq!(whole_escapes(text, &[(5, 8)]), [(5, 9)]);
        assert_eq!(whole_escapes(text, &[(8, 12)]), [(7, 16)]);
        assert_eq!(whole_escapes(text, &[(12, 18)]), [(10, 19)]);
        // Outside strings and on escape boundaries nothing moves.
        assert_eq!(whole_escapes(text, &[(1, 4), (7, 9)]), [(1, 4), (7, 9)]);
        // Widened ranges that meet are merged.
        assert_eq!(whole_escapes(text, &[(6, 8), (8, 11)]), [(6, 16)]);
    }
}
