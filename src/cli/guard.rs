//! The command line's guard against typos: global options (`-C DIR`) before a subcommand, and a
//! one-word experiment message that looks like a mistyped subcommand (`ratchet reslts`), which
//! is refused before anything is committed or run.

use crate::error::{Error, Result};
use std::ffi::OsString;

/// Move global options written before a subcommand (`ratchet -C DIR results`) after it, where
/// clap accepts them. Without this, the leading option makes clap read `results` as an
/// experiment's message. Anything else is left exactly as written.
pub fn normalize_args(args: Vec<OsString>, subcommands: &[String]) -> Vec<OsString> {
    let mut globals = vec![];
    let mut i = 1;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        if a == "-C" || a == "--repo" {
            if i + 1 >= args.len() {
                return args;
            }
            globals.push(args[i].clone());
            globals.push(args[i + 1].clone());
            i += 2;
        } else if a.starts_with("--repo=") || (a.starts_with("-C") && a.len() > 2) {
            globals.push(args[i].clone());
            i += 1;
        } else {
            break;
        }
    }
    if globals.is_empty() || i >= args.len() || !subcommands.iter().any(|s| *s == args[i].to_string_lossy()) {
        return args;
    }
    let mut out = vec![args[0].clone(), args[i].clone()];
    out.extend(globals);
    out.extend(args[i + 1..].iter().cloned());
    out
}

/// Refuse an experiment message that is one bare word close to (or equal to) a subcommand's
/// name: `ratchet reslts` must not commit and benchmark the working tree as "reslts". A real
/// hypothesis is a phrase ("experiment: bump BQ to 512"), so a single word is never needed.
pub fn check_message(message: &str, subcommands: &[String]) -> Result<()> {
    let (word, _) = crate::experiment::split_deep_suffix(message);
    let word = word.trim();
    if !is_bare_word(word) {
        return Ok(());
    }
    let Some((d, name)) = closest(word, subcommands) else { return Ok(()) };
    let what = if d == 0 { "is a subcommand's name" } else { "looks like a mistyped subcommand" };
    Err(Error::usage(format!("the experiment message {word:?} {what}; did you mean `ratchet {name}`? Nothing was committed or run"))
        .hint(format!("to run an experiment, describe it in words: ratchet \"experiment: {word}\"")))
}

/// One word as a subcommand's name is spelled (letters, digits, `-`, `_`), not a phrase.
fn is_bare_word(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The subcommand `word` is closest to, and its distance, when within a typo's reach: one
/// edit for short names, two from six letters on ("reslts" -> "results").
fn closest<'a>(word: &str, subcommands: &'a [String]) -> Option<(usize, &'a String)> {
    let lower = word.to_ascii_lowercase();
    let (d, name) = subcommands.iter().map(|s| (strsim::osa_distance(&lower, s), s)).min_by_key(|(d, _)| *d)?;
    let limit = if name.len() >= 6 { 2 } else { 1 };
    (d <= limit).then_some((d, name))
}

/// A mistyped subcommand followed by its arguments (`ratchet shwo 2`), which clap reads as an
/// experiment message and then a stray subcommand: the typo, named, instead of clap's
/// "the subcommand '2' cannot be used with '[MESSAGE]'".
pub fn mistyped_subcommand(args: &[OsString], subcommands: &[String]) -> Option<Error> {
    let word = args.get(1)?.to_str()?;
    if args.len() < 3 || word.starts_with('-') || subcommands.iter().any(|s| s == word) || !is_bare_word(word) {
        return None;
    }
    let (_, name) = closest(word, subcommands)?;
    Some(
        Error::usage(format!("there is no command {word:?}; did you mean `ratchet {name}`? Nothing was committed or run"))
            .hint("to run an experiment, give its message as one quoted phrase: ratchet \"experiment: ...\""),
    )
}

/// The `--color` the command line asks for (`--color WHEN` or `--color=WHEN`, the last one
/// wins), read before clap parses so that clap's own messages follow it too.
pub fn color_choice(args: &[OsString]) -> crate::cli::term::ColorChoice {
    use crate::cli::term::ColorChoice;
    let mut choice = ColorChoice::Auto;
    let mut it = args.iter().skip(1).map(|a| a.to_string_lossy());
    while let Some(a) = it.next() {
        let value = match a.strip_prefix("--color=") {
            Some(v) => Some(v.to_string()),
            None if a == "--color" => it.next().map(|v| v.to_string()),
            None if a == "--" => break,
            None => None,
        };
        match value.as_deref() {
            Some("always") => choice = ColorChoice::Always,
            Some("never") => choice = ColorChoice::Never,
            Some("auto") => choice = ColorChoice::Auto,
            _ => {}
        }
    }
    choice
}

/// The subcommand names (and `help`) of the command line.
pub fn subcommand_names() -> Vec<String> {
    use clap::CommandFactory;
    let mut v: Vec<String> = crate::cli::args::Cli::command().get_subcommands().map(|s| s.get_name().to_string()).collect();
    v.push("help".into());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_mistyped_subcommand_with_arguments_is_named() {
        let subs = subcommand_names();
        let e = mistyped_subcommand(&os(&["ratchet", "shwo", "2"]), &subs).expect("a typo");
        assert!(e.message.contains("there is no command \"shwo\"; did you mean `ratchet show`?"), "{}", e.message);
        for fine in
            [&["ratchet", "show", "2"][..], &["ratchet", "experiment: bump BQ"], &["ratchet", "--color", "never"], &["ratchet", "shwo"]]
        {
            assert!(mistyped_subcommand(&os(fine), &subs).is_none(), "{fine:?}");
        }
    }

    #[test]
    fn the_color_choice_is_read_before_clap() {
        use crate::cli::term::ColorChoice::*;
        assert_eq!(color_choice(&os(&["ratchet", "shwo", "2", "--color", "never"])), Never);
        assert_eq!(color_choice(&os(&["ratchet", "--color=always", "x"])), Always);
        assert_eq!(color_choice(&os(&["ratchet", "--color", "never", "--color", "auto"])), Auto);
        assert_eq!(color_choice(&os(&["ratchet", "--", "--color", "never"])), Auto);
    }

    #[test]
    fn typos_are_refused_and_phrases_pass() {
        let subs = subcommand_names();
        for bad in ["reslts", "results", "stauts", "Status", "swep", "sho", "plto", "calibrat", "inpsect", "results --deep"] {
            let e = check_message(bad, &subs).unwrap_err();
            assert!(e.message.contains("did you mean"), "{bad}: {}", e.message);
        }
        for good in ["experiment: bump BQ to 512", "experiment: results --deep", "bump BQ", "retile-kv-loop", "results of tiling"] {
            assert!(check_message(good, &subs).is_ok(), "{good}");
        }
    }

    #[test]
    fn leading_global_options_move_after_the_subcommand() {
        let subs = subcommand_names();
        assert_eq!(normalize_args(os(&["r", "-C", "d", "results", "--kept"]), &subs), os(&["r", "results", "-C", "d", "--kept"]));
        assert_eq!(normalize_args(os(&["r", "--repo=d", "status"]), &subs), os(&["r", "status", "--repo=d"]));
        assert_eq!(normalize_args(os(&["r", "-Cd", "-C", "e", "show", "1"]), &subs), os(&["r", "show", "-Cd", "-C", "e", "1"]));
        // Not a subcommand: the message stays where it is.
        let msg = os(&["r", "-C", "d", "experiment: x", "--deep"]);
        assert_eq!(normalize_args(msg.clone(), &subs), msg);
        assert_eq!(normalize_args(os(&["r", "-C"]), &subs), os(&["r", "-C"]));
    }
}
