//! Fault injection for the crash-safety tests: `RATCHET_FAULT=<point>` makes ratchet SIGKILL
//! itself when it reaches that named step boundary, exactly as a power cut or an OOM kill
//! would stop it there. Unset (always, in normal use), a point costs one environment lookup.

/// The step boundaries an experiment passes, in order. `mid-commit`: the hypothesis commit is
/// made and HEAD moved, the index not yet brought in line; `mid-worktree`: the incumbent
/// checkout's scratch branch exists, the worktree does not (first experiment only);
/// `mid-revert`: the hypothesis is parked, the work tree untouched; `mid-revert-checkout`: the
/// work tree and index are back on the incumbent, the branch still on the hypothesis.
pub const POINTS: &[&str] = &[
    "before-commit",
    "mid-commit",
    "after-commit",
    "mid-worktree",
    "before-decision",
    "after-decision",
    "mid-revert",
    "mid-revert-checkout",
    "before-append",
    "mid-append",
    "after-append",
];

/// Points on the revert path only (a kept hypothesis never reaches them).
pub const REVERT_ONLY: &[&str] = &["mid-revert", "mid-revert-checkout"];

/// Whether the environment asks to die at `name` (a step that can tear a write makes the tear
/// first).
pub fn armed(name: &str) -> bool {
    std::env::var("RATCHET_FAULT").is_ok_and(|v| v == name)
}

/// Die here if the environment asks for it. With `RATCHET_FAULT_ONCE=<path>` as well, only the
/// first process to reach the point dies (the one that creates `<path>`): a parallel sweep's
/// worker is killed there once, and the trial's retry passes it.
pub fn point(name: &str) {
    if std::env::var("RATCHET_FAULT").is_ok_and(|v| v == name) {
        if let Some(once) = std::env::var_os("RATCHET_FAULT_ONCE") {
            if std::fs::OpenOptions::new().write(true).create_new(true).open(once).is_err() {
                return;
            }
        }
        // SAFETY: raising a signal on ourselves; SIGKILL cannot be caught, so nothing runs after.
        unsafe {
            libc::raise(libc::SIGKILL);
        }
    }
}
