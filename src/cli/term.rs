//! Terminal conventions in one place: the width tables fit into (`COLUMNS`, else the terminal's
//! own size, else 80) and whether to colour (`--color`, `NO_COLOR`, `TERM=dumb`, a terminal).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};

/// `--color`: when to colour the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorChoice {
    /// Colour on a terminal, unless `NO_COLOR` is set or `TERM` is `dumb`.
    #[default]
    Auto,
    Always,
    Never,
}

static CHOICE: AtomicU8 = AtomicU8::new(0);

/// Record the command line's `--color` for [`color`].
pub fn set_color_choice(c: ColorChoice) {
    CHOICE.store(
        match c {
            ColorChoice::Auto => 0,
            ColorChoice::Always => 1,
            ColorChoice::Never => 2,
        },
        Ordering::Relaxed,
    );
}

/// Whether stdout gets colour: `--color always|never` wins; otherwise colour only on a terminal,
/// and never with `NO_COLOR` set to anything non-empty (no-color.org) or `TERM=dumb`.
pub fn color() -> bool {
    let choice = match CHOICE.load(Ordering::Relaxed) {
        1 => ColorChoice::Always,
        2 => ColorChoice::Never,
        _ => ColorChoice::Auto,
    };
    decide_color(choice, std::env::var_os("NO_COLOR"), std::env::var("TERM").ok().as_deref(), std::io::stdout().is_terminal())
}

fn decide_color(choice: ColorChoice, no_color: Option<std::ffi::OsString>, term: Option<&str>, tty: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => tty && no_color.is_none_or(|v| v.is_empty()) && term != Some("dumb"),
    }
}

/// The width to fit output into: `COLUMNS` when set (as shells and test harnesses set it),
/// else the terminal's width, else 80 (a pipe or a file: the conventional width).
pub fn width() -> usize {
    if let Some(w) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|&w| w > 0) {
        return w.max(40);
    }
    terminal_size::terminal_size().map(|(w, _)| w.0 as usize).filter(|&w| w > 0).unwrap_or(80).max(40)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn color_follows_the_conventions() {
        let on = Some(std::ffi::OsString::from("1"));
        assert!(decide_color(ColorChoice::Auto, None, Some("xterm"), true));
        assert!(!decide_color(ColorChoice::Auto, on.clone(), Some("xterm"), true), "NO_COLOR");
        assert!(decide_color(ColorChoice::Auto, Some("".into()), Some("xterm"), true), "an empty NO_COLOR is unset");
        assert!(!decide_color(ColorChoice::Auto, None, Some("dumb"), true), "TERM=dumb");
        assert!(!decide_color(ColorChoice::Auto, None, Some("xterm"), false), "a pipe");
        assert!(decide_color(ColorChoice::Always, on, Some("dumb"), false));
        assert!(!decide_color(ColorChoice::Never, None, Some("xterm"), true));
    }
}
