//! `ratchet init`: set a repository up for ratchet: a commented `ratchet.toml` (the detected
//! device, the project venv's Python), a starter benchmark when there is none, and the
//! benchmark helper's output kept out of git.

use crate::cli::args::InitArgs;
use crate::config;
use crate::error::{Error, Result, WithPath};
use std::io::Write;
use std::path::Path;

/// The starter benchmark and kernel (`assets/starter/`), written only where no file of that
/// name exists: a Pallas matmul that runs on CPU too, measured through `ratchet_bench`.
const STARTER: &[(&str, &str)] =
    &[("prepare.py", include_str!("../../assets/starter/prepare.py")), ("kernel.py", include_str!("../../assets/starter/kernel.py"))];

/// What `ratchet_bench` writes when prepare.py runs by hand (python/ratchet_bench.py
/// `DEFAULT_OUT`): never part of a commit.
const HELPER_OUTPUT: &str = "profile_data/";

pub fn run(dir: &Path, args: &InitArgs) -> Result<()> {
    let repo = crate::vcs::open_repository(dir).ok().filter(|r| r.workdir().is_some());
    let root = match repo.as_ref().and_then(|r| r.workdir()) {
        Some(w) => w.canonicalize().unwrap_or_else(|_| w.to_path_buf()),
        None => {
            eprintln!(
                "warning: {} is not inside a git repository: ratchet commits, keeps and reverts each hypothesis with git, \
                 so experiments will not run here; run `git init`, then commit the files written below",
                dir.display()
            );
            dir.to_path_buf()
        }
    };
    let path = config::path_in(&root);
    if path.exists() && !args.force {
        return Err(Error::config(format!("{} already exists", path.display())).hint("pass --force to overwrite it"));
    }
    let (preset, detected) = match &args.preset {
        Some(p) => (p.clone(), None),
        None => match super::detect::detect() {
            Some((p, from)) => (p.to_string(), Some(format!("detected {from}"))),
            None => ("cpu".to_string(), Some("no TPU or known GPU detected: nominal CPU figures; pass --preset to choose".to_string())),
        },
    };
    if crate::hardware::preset(&preset).is_none() {
        return Err(Error::usage(format!("unknown hardware preset {preset:?}; known: {}", crate::hardware::preset_names().join(", "))));
    }
    // The incumbent runs from a checkout under .ratchet/ that has no ignored venv: name the
    // venv's interpreter from the repo's root, which every run gets as RATCHET_REPO.
    let venv = super::detect::venv_python(&root);
    let python = venv.as_ref().map(|v| format!("$RATCHET_REPO/{v}")).unwrap_or_else(|| "python3".into());
    let mut written = vec![];
    let command = match &args.command {
        Some(c) => c.clone(),
        None => {
            if !root.join("prepare.py").exists() {
                for (name, text) in STARTER {
                    if write_new(&root.join(name), text)? {
                        written.push(*name);
                    }
                }
            }
            format!("{python} prepare.py")
        }
    };
    let text = config::template(&command, &preset);
    crate::store::write_atomic(&path, text.as_bytes())?;
    println!(
        "wrote {} (benchmark: {command}; hardware: {preset}{})",
        path.display(),
        detected.map(|d| format!(", {d}")).unwrap_or_default()
    );
    if let Some(v) = &venv {
        println!(
            "found the project venv's Python {v}: the command names it as $RATCHET_REPO/{v}, so the incumbent's checkout finds it too"
        );
    }
    if written.contains(&"prepare.py") {
        let kernel = if written.contains(&"kernel.py") {
            "a starter kernel.py (a Pallas matmul) and a prepare.py that measures it"
        } else {
            "a starter prepare.py; it measures kernel.matmul and kernel.reference, so point it at your kernel.py's functions"
        };
        println!("wrote {kernel} (a commented starting point; docs/prepare.md explains every argument)");
    } else if args.command.is_none() {
        println!("found prepare.py: it should follow the benchmark protocol (docs/protocol.md), or print RESULT: lines");
    }
    let mut ignore = vec![HELPER_OUTPUT.to_string()];
    if let Some(v) = &venv {
        ignore.push(format!("/{}/", v.split('/').next().unwrap_or(v)));
    }
    let added = ensure_ignored(&root, repo.as_ref(), &ignore)?;
    if !added.is_empty() {
        println!("added {} to .gitignore (what running the benchmark by hand writes stays out of hypotheses)", added.join(", "));
        written.push(".gitignore");
    }
    let mut files = vec!["ratchet.toml"];
    files.extend(written.iter().filter(|f| **f != "ratchet.toml"));
    // Files it found but git does not track yet (a prepare.py written by hand) belong to the
    // set-up commit too: the incumbent's checkout has only what is committed.
    for (name, _) in STARTER {
        let untracked = repo.as_ref().is_some_and(|r| r.status_file(Path::new(name)).is_ok_and(|s| s.is_wt_new()));
        if untracked && !files.contains(name) {
            files.push(name);
        }
    }
    println!("next: git add {} && git commit -m \"ratchet set-up\"", files.join(" "));
    Ok(())
}

/// Write `text` to `path` unless a file is already there (never overwritten); whether it wrote.
fn write_new(path: &Path, text: &str) -> Result<bool> {
    match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(mut f) => {
            f.write_all(text.as_bytes()).with_path(path)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).with_path(path),
    }
}

/// Append each of `patterns` (directory patterns such as "profile_data/") to `root/.gitignore`
/// unless git already ignores that directory (or, outside a repository, the file already has
/// the line); the patterns added.
fn ensure_ignored(root: &Path, repo: Option<&git2::Repository>, patterns: &[String]) -> Result<Vec<String>> {
    let path = root.join(".gitignore");
    let mut text = if std::fs::symlink_metadata(&path).is_err() {
        String::new()
    } else {
        crate::safe_read::read_text_capped(&path, 16 << 20).map_err(|e| crate::error::Error::usage(e.0))?
    };
    let mut added = vec![];
    for p in patterns {
        let probe = p.trim_start_matches('/');
        let ignored = match repo {
            Some(r) => r.is_path_ignored(probe).unwrap_or(false),
            None => text.lines().any(|l| l.trim().trim_start_matches('/').trim_end_matches('/') == probe.trim_end_matches('/')),
        };
        if !ignored {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(p);
            text.push('\n');
            added.push(p.clone());
        }
    }
    if !added.is_empty() {
        crate::fsutil::write_atomic(&path, text.as_bytes())?;
    }
    Ok(added)
}
