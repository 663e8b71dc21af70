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
