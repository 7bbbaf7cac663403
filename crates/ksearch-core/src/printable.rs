//! Text that reaches a terminal, made safe to print: a candidate's messages, output and compile
//! log are its own words, and a terminal obeys the control sequences in them (clear the screen,
//! move the cursor, set the title, write the clipboard), so a hostile candidate could paint a
//! report of its own over the real one. Every control character but newline and tab is shown
//! as an escape instead.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character except `\n` and `\t` written as `\u{…}` (ESC reads
/// `\u{1b}`), so that it prints as what it is.
pub fn printable(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_are_shown_not_obeyed() {
        let forged = "error\u{1b}[2K\u{1b}[1A\u{1b}]0;title\u{7} \u{9b}31m\r\nnext\tcol";
        let shown = printable(forged);
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
        assert_eq!(
            shown,
            "error\\u{1b}[2K\\u{1b}[1A\\u{1b}]0;title\\u{7} \\u{9b}31m\\u{d}\nnext\tcol"
        );
        assert!(matches!(printable("plain text\n"), Cow::Borrowed(_)));
    }
}
