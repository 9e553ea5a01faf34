//! Strings from users made safe for a terminal: a command, a directory or an error naming them
//! could otherwise clear another user's screen, move its cursor or forge lines of a listing.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with each control character written as an escape, as `systemctl` shows unit names:
/// `\n`, `\t`, `\r`, else `\xNN` (C1 controls such as `\x9b`, a one-character CSI, included),
/// and a backslash doubled so that an escape cannot be forged.
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() || c == '\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // Every control character is below U+00A0.
            c if c.is_control() => write!(out, "\\x{:02x}", c as u32).expect("a String takes it"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn control_characters_are_shown_escaped_and_the_rest_as_it_is() {
        assert_eq!(escaped("lu -n 4 é"), "lu -n 4 é");
        assert_eq!(escaped("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escaped("one\ntwo\tthree\r"), "one\\ntwo\\tthree\\r");
        assert_eq!(escaped("csi\u{9b}2J del\x7f"), "csi\\x9b2J del\\x7f");
        assert_eq!(escaped("a\\x1b"), "a\\\\x1b");
    }
}
