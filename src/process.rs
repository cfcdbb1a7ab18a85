//! Child processes, started in one place: each in a process group of its own (so a stop reaches
//! whatever it starts), signalled as a group, and waited on with a deadline.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Put the command's process in a new process group, led by it: the terminal's SIGINT then goes
/// to ratchet alone, and [`signal_group`] reaches everything the process starts in the group.
pub fn own_group(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0)
}

/// Send `sig` to the process group `pgid`. An exited group (ESRCH) is no error; a pgid of 0 or 1
/// (this process's own group, or init's) is never signalled.
pub fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: killpg has no memory effects.
        unsafe {
            libc::killpg(pgid, sig);
        }
    }
}

/// "signal 9 (SIGKILL)": a signal's number, with its name where it is one a benchmark or a
/// worker is commonly stopped or crashes by. The one place messages name signals.
pub fn signal(sig: i32) -> String {
    let name = match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGXCPU => "SIGXCPU",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig} ({name})")
}

/// Run `cmd` in a group of its own with no stdin and its output captured; `None` when it cannot
/// start or does not exit within `limit`, in which case its whole group is killed (a probe's
/// children do not outlive its timeout).
pub fn output_within(mut cmd: Command, limit: Duration) -> Option<Output> {
    own_group(&mut cmd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().ok()?;
    let pgid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.ok(),
        Err(_) => {
            signal_group(pgid, libc::SIGKILL);
            // Reaped by the waiting thread once the pipes close; a process that left the group
            // and holds them open is not waited for.
            let _ = rx.recv_timeout(Duration::from_secs(2));
            None
        }
    }
}

/// For the unit tests that kill a process group: whether `pid` runs (a zombie counts as gone).
#[cfg(test)]
pub(crate) fn runs(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|r| !r.trim_start().starts_with('Z')))
}

/// For the unit tests: wait until `pid` is gone after a SIGKILL was sent to it. Its delivery is
/// the kernel's and takes what the machine's load makes it, so there is no deadline, only a
/// guard that turns a kill that never lands into a failure instead of a hung test (the same
/// guard as the integration tests' `support::HANG_GUARD`).
#[cfg(test)]
pub(crate) fn wait_gone(pid: i32) -> bool {
    let guard = std::time::Instant::now() + Duration::from_secs(900);
    while runs(pid) && std::time::Instant::now() < guard {
        std::thread::sleep(Duration::from_millis(20));
    }
    !runs(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_past_its_deadline_is_killed_with_its_children() {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("child.pid");
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
        assert!(output_within(cmd, Duration::from_millis(500)).is_none());
        let child: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        assert!(wait_gone(child), "the probe's child {child} outlived the probe's timeout");
    }

    #[test]
    fn a_probe_within_its_deadline_gives_its_output_and_status() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg("echo out; echo err >&2; exit 3");
        let out = output_within(cmd, Duration::from_secs(20)).unwrap();
        assert_eq!((out.status.code(), out.stdout.as_slice(), out.stderr.as_slice()), (Some(3), &b"out\n"[..], &b"err\n"[..]));
        assert!(output_within(Command::new("/nonexistent/program"), Duration::from_secs(1)).is_none());
    }

    #[test]
    fn signals_are_named_by_number_and_name_where_known() {
        assert_eq!(signal(libc::SIGKILL), "signal 9 (SIGKILL)");
        assert_eq!(signal(libc::SIGSEGV), "signal 11 (SIGSEGV)");
        assert_eq!(signal(libc::SIGTERM), "signal 15 (SIGTERM)");
        // A number no benchmark is commonly stopped by keeps its number alone.
        assert_eq!(signal(64), "signal 64");
    }
}
