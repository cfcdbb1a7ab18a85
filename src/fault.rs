//! Fault injection for the crash-safety tests: `RATCHET_FAULT=<point>` makes ratchet SIGKILL
//! itself when it reaches that named step boundary, exactly as a power cut or an OOM kill
//! would stop it there. Unset (always, in normal use), a point costs one environment lookup.

/// The step boundaries an experiment passes, in order.
pub const POINTS: &[&str] =
    &["before-commit", "after-commit", "before-decision", "after-decision", "mid-revert", "before-append", "mid-append", "after-append"];

/// Die here if the environment asks for it.
pub fn point(name: &str) {
    if std::env::var("RATCHET_FAULT").is_ok_and(|v| v == name) {
        // SAFETY: raising a signal on ourselves; SIGKILL cannot be caught, so nothing runs after.
        unsafe {
            libc::raise(libc::SIGKILL);
        }
    }
}
