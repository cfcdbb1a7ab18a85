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
    let bare = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !bare {
        return Ok(());
    }
    let lower = word.to_ascii_lowercase();
    let best = subcommands.iter().map(|s| (strsim::osa_distance(&lower, s), s)).min_by_key(|(d, _)| *d);
    let Some((d, name)) = best else { return Ok(()) };
    // One edit for short names, two from six letters on ("reslts" -> "results").
    let limit = if name.len() >= 6 { 2 } else { 1 };
    if d > limit {
        return Ok(());
    }
    let what = if d == 0 { "is a subcommand's name" } else { "looks like a mistyped subcommand" };
    Err(Error::usage(format!("the experiment message {word:?} {what}; did you mean `ratchet {name}`? Nothing was committed or run"))
        .hint(format!("to run an experiment, describe it in words: ratchet \"experiment: {word}\"")))
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
