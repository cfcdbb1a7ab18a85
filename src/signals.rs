//! SIGINT, SIGTERM and SIGHUP (a closed terminal or SSH session, the usual end of an overnight
//! run) become a flag that the run loop polls, so that an interrupted experiment kills its
//! benchmark, rolls back and records itself instead of dying half-way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

fn flag() -> &'static Arc<AtomicBool> {
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// A cancellation token: what the core polls to stop cleanly (kill the benchmark, roll back,
/// record). [`Cancel::signals`] is set by SIGINT, SIGTERM and SIGHUP; [`Cancel::new`] only by
/// [`Cancel::cancel`] (tests, a scheduler stopping one experiment).
#[derive(Debug, Clone)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// The token the signals set (once [`install`] has run).
    pub fn signals() -> Cancel {
        Cancel(Arc::clone(flag()))
    }

    /// A token of its own, set only by [`Cancel::cancel`].
    pub fn new() -> Cancel {
        Cancel(Arc::new(AtomicBool::new(false)))
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::new()
    }
}

/// Route SIGINT, SIGTERM and SIGHUP to the flag. Idempotent.
pub fn install() -> std::io::Result<()> {
    let flag = flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, Arc::clone(flag))?;
    }
    Ok(())
}

/// Whether a SIGINT, SIGTERM or SIGHUP has arrived since `install`.
pub fn interrupted() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// Test hook, like `RATCHET_FAULT`: `RATCHET_SIGNAL_AT=<point>` makes ratchet send itself SIGINT
/// when it reaches that named point, as a Ctrl-C arriving exactly then would. Unset (always, in
/// normal use), a point costs one environment lookup.
pub fn inject(point: &str) {
    if std::env::var("RATCHET_SIGNAL_AT").is_ok_and(|v| v == point) {
        // SAFETY: raising a handled signal on ourselves; the handler only sets the flag.
        unsafe {
            libc::raise(libc::SIGINT);
        }
    }
}
