//! Text ratchet did not write (messages, file names, a benchmark's output, names in a trace) made
//! safe for a terminal: the one place where control characters become visible escapes.
//!
//! The text faces call [`line`] on a one-line field before formatting (and colouring) it, and
//! [`block`] on what they print whole; `--json`, the CSV and the HTML report keep the exact text.
//! The escapes are C-like, as `ls --quoting-style=escape` writes them: `\e` (ESC), `\a`, `\b`,
//! `\t`, `\n`, `\r`, and `\u{..}` for the other C0 and C1 controls, DEL and the bidi controls.
//! Other Unicode is kept, and a backslash stays a backslash: the point is that nothing reaches
//! the terminal as a command, not that the text can be parsed back.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

/// A one-line field: every control character escaped, newlines and tabs too, so the field can
/// neither drive the terminal nor start a line of its own.
pub fn line(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// A block of lines (a stderr tail, a whole report): newlines and tabs kept, every other control
/// character escaped, so each line is as [`line`] would make it.
pub fn block(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// A name git holds as bytes (a path that may not be UTF-8) as one line: its valid text as
/// [`line`] makes it, every other byte as `\xNN`.
pub fn bytes(b: &[u8]) -> String {
    let mut out = String::new();
    for chunk in b.utf8_chunks() {
        out.push_str(&line(chunk.valid()));
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// A path as one line: `Path::display`, then [`line`].
pub fn path(p: &Path) -> String {
    line(&p.to_string_lossy()).into_owned()
}

/// Characters a terminal may act on rather than show: C0 and C1 controls and DEL (Unicode's
/// `Cc`, which is what `char::is_control` reads), and the bidi controls, which reorder what
/// follows them (the "Trojan Source" trick).
fn unsafe_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape(s: &str, keep_lines: bool) -> Cow<'_, str> {
    let escaped = |c: char| unsafe_char(c) && !(keep_lines && (c == '\n' || c == '\t'));
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !escaped(c) {
            out.push(c);
            continue;
        }
        match c {
            '\x1b' => out.push_str("\\e"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_of_control_character_is_escaped() {
        // C0: the named ones, and the rest by number; DEL; C1 (here CSI, a one-byte ESC [).
        assert_eq!(line("\x1b]0;t\x07\x08\t\n\r"), r"\e]0;t\a\b\t\n\r");
        assert_eq!(line("\0\x01\x0b\x0c\x1f\x7f"), r"\u{0}\u{1}\u{b}\u{c}\u{1f}\u{7f}");
        assert_eq!(line("\u{80}\u{9b}31m\u{9f}"), r"\u{80}\u{9b}31m\u{9f}");
        // Every bidi control: the embeddings and overrides, the isolates, the marks.
        let bidi = "\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{061c}";
        assert_eq!(line(bidi), r"\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{61c}");
        // An OSC 8 hyperlink leaves no ESC behind.
        assert_eq!(line("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), r"\e]8;;http://x\e\link\e]8;;\e\");
    }

    #[test]
    fn other_text_is_kept_as_it_is_and_borrowed() {
        for s in ["plain: BQ 128 -> 256", "données ✔ 日本語 ½ emoji 🚀", r"a\nb is a backslash and an n", "e\u{301}", ""] {
            assert!(matches!(line(s), Cow::Borrowed(_)), "{s}");
            assert!(matches!(block(s), Cow::Borrowed(_)), "{s}");
        }
        // U+00A0 (no-break space) is the first character after C1: kept.
        assert_eq!(line("a\u{a0}b"), "a\u{a0}b");
    }

    #[test]
    fn a_block_keeps_its_lines_and_tabs_but_escapes_the_rest() {
        assert_eq!(block("Traceback:\n\tboom\x1b[2J\r\nnext\x07"), "Traceback:\n\tboom\\e[2J\\r\nnext\\a");
        assert_eq!(line("a\nb"), r"a\nb");
    }

    #[test]
    fn a_path_is_one_line() {
        assert_eq!(path(Path::new("runs/nl\nKEEP\x1b.py")), r"runs/nl\nKEEP\e.py");
    }

    #[test]
    fn a_name_that_is_not_utf8_shows_its_bytes_and_no_control() {
        assert_eq!(bytes(b"w\xffights.py"), "w\\xffights.py");
        assert_eq!(bytes(b"a\x1b]0;t\x07\xe9.py"), "a\\e]0;t\\a\\xe9.py");
        assert_eq!(bytes("plain/\u{e9}.py".as_bytes()), "plain/\u{e9}.py");
    }
}
