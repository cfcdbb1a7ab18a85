//! One ratchet per repository: an advisory lock (flock) on `.git/ratchet/lock` (in the common
//! git dir, so linked worktrees of one repository share it), which the kernel releases when its
//! holder dies however it dies. The file records who holds it, so a second ratchet can say who is
//! in the way, and a lock left by a dead process is reported as cleared. Every command that
//! touches shared state (worktrees, journal, results, refs) holds it.

use crate::error::WithPath;
use crate::error::{Error, Kind, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a lock whose recorded holder is dead may stay held before it is reported (see
/// [`RepoLock::acquire`]).
const DEAD_HOLDER_WAIT: Duration = Duration::from_secs(5);

/// The holder the open lock file records, read from its start.
fn recorded(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

/// Who holds the lock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub started: String,
    pub command: String,
}

impl Holder {
    /// What to tell the user when this dead holder's lock was cleared.
    pub fn stale_note(&self) -> String {
        format!("cleared a stale lock left by ratchet pid {} (started {}), which is no longer running", self.pid, self.started)
    }
}

/// Who the lock file names as its holder, if anyone wrote it (read without taking the lock:
/// for `ratchet status` while another ratchet works).
pub fn holder(state_dir: &Path) -> Option<Holder> {
    serde_json::from_str(&std::fs::read_to_string(state_dir.join("lock")).ok()?).ok()
}

/// Held until dropped.
#[derive(Debug)]
pub struct RepoLock {
    file: File,
    stale: Option<Holder>,
}

impl RepoLock {
    /// Take the lock of the repo whose state directory is `state_dir`, or fail with
    /// [`Kind::Locked`] naming the holder. A lock still held after its recorded holder died is
    /// waited for, up to a few seconds (a ratchet killed mid-spawn leaves it to its child for
    /// that long), then reported with the file to look for.
    pub fn acquire(state_dir: &Path, command: &str) -> Result<RepoLock> {
        Self::acquire_within(state_dir, command, DEAD_HOLDER_WAIT)
    }

    /// [`RepoLock::acquire`], waiting up to `wait` while the lock is held but its recorded holder
    /// is dead.
    fn acquire_within(state_dir: &Path, command: &str, wait: Duration) -> Result<RepoLock> {
        std::fs::create_dir_all(state_dir).with_path(state_dir)?;
        let path = state_dir.join("lock");
        let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).with_path(&path)?;
        let me = std::process::id();
        let dead = |h: &Holder| h.pid != me && !crate::bench::executor::alive(h.pid as i32);
        let first_try = Instant::now();
        let previous = loop {
            let previous = recorded(&mut file);
            // SAFETY: flock on a descriptor we own; no memory is shared with the kernel.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                break previous;
            }
            // A holder that died can hold the lock no longer, but a child it forked just before
            // keeps a copy of the descriptor until its exec closes it: milliseconds, more on a
            // loaded machine. Wait that out rather than send the user away.
            match previous.as_ref().filter(|h| dead(h)) {
                Some(_) if first_try.elapsed() < wait => std::thread::sleep(Duration::from_millis(20)),
                Some(h) => {
                    return Err(Error::new(
                        Kind::Locked,
                        format!(
                            "the repository's lock is still held, though ratchet pid {} (since {}, `{}`), which took it, is no longer running: a process it started still has {} open",
                            h.pid,
                            h.started,
                            h.command,
                            path.display()
                        ),
                    )
                    .hint(format!("find that process with `lsof {}` and stop it, then run this again", path.display())));
                }
                None => {
                    let who = match &previous {
                        Some(h) => format!("pid {} since {} (`{}`)", h.pid, h.started, h.command),
                        None => "another process".to_string(),
                    };
                    return Err(Error::new(Kind::Locked, format!("another ratchet is working on this repository: {who}"))
                        .hint("wait for it to finish, or stop it (Ctrl-C or kill PID: it rolls back cleanly)"));
                }
            }
        };
        // Reported by the caller (a note): the lock itself prints nothing.
        let stale = previous.filter(dead);
        let me = Holder { pid: me, started: crate::fsutil::now(), command: command.to_string() };
        let write = |file: &mut File| -> std::io::Result<()> {
            file.set_len(0)?;
            file.rewind()?;
            file.write_all(serde_json::to_string(&me).expect("holder serializes").as_bytes())?;
            crate::fsutil::sync_data(file)
        };
        write(&mut file).with_path(&path)?;
        Ok(RepoLock { file, stale })
    }

    /// Take the lock of `repo` (all its worktrees).
    pub fn for_repo(repo: &crate::vcs::Repo, command: &str) -> Result<RepoLock> {
        Self::acquire(&repo.common_state_dir(), command)
    }

    /// The holder recorded by a process that died holding the lock, if this acquisition cleared one.
    pub fn stale(&self) -> Option<&Holder> {
        self.stale.as_ref()
    }
}

impl Drop for RepoLock {
    fn drop(&mut self) {
        // Empty the record first so no one reports us as its holder. Then unlock explicitly:
        // closing is not enough while a child forked meanwhile (by another thread, before its
        // exec closes the descriptor) holds a copy of it, since the flock belongs to the shared
        // open file description.
        let _ = self.file.set_len(0);
        // SAFETY: flock on a descriptor we own.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_and_released_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let first = RepoLock::acquire(d.path(), "ratchet one").unwrap();
        // flock locks belong to open file descriptions: a second open in this process conflicts too.
        let err = RepoLock::acquire(d.path(), "ratchet two").unwrap_err();
        assert_eq!(err.kind, Kind::Locked);
        assert!(err.message.contains(&format!("pid {}", std::process::id())), "{}", err.message);
        assert!(err.message.contains("ratchet one"));
        drop(first);
        RepoLock::acquire(d.path(), "ratchet three").unwrap();
    }

    #[test]
    fn a_dropped_lock_is_free_even_while_a_copy_of_its_descriptor_lives() {
        let d = tempfile::tempdir().unwrap();
        let lock = RepoLock::acquire(d.path(), "ratchet one").unwrap();
        // What a child forked before its exec holds: the same open file description.
        // SAFETY: dup of a descriptor the lock owns; closed below.
        let copy = unsafe { libc::dup(lock.file.as_raw_fd()) };
        assert!(copy >= 0);
        drop(lock);
        let again = RepoLock::acquire(d.path(), "ratchet two");
        // SAFETY: the descriptor dup returned above.
        unsafe { libc::close(copy) };
        assert!(again.is_ok(), "{:?}", again.err());
    }

    /// A lock held through a second open file description, as a child forked by the holder
    /// before its exec holds it, with a record naming a holder that is not running.
    fn held_for_a_dead_holder(dir: &Path) -> File {
        std::fs::write(dir.join("lock"), r#"{"pid":999999999,"started":"yesterday","command":"ratchet sweep"}"#).unwrap();
        let copy = File::open(dir.join("lock")).unwrap();
        // SAFETY: flock on a descriptor this test owns.
        assert_eq!(unsafe { libc::flock(copy.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
        copy
    }

    #[test]
    fn a_lock_a_dead_holder_s_child_still_holds_is_taken_once_the_child_lets_go() {
        let d = tempfile::tempdir().unwrap();
        let copy = held_for_a_dead_holder(d.path());
        let child = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(copy);
        });
        let lock = RepoLock::acquire(d.path(), "ratchet sweep").unwrap();
        child.join().unwrap();
        assert_eq!(lock.stale().map(|h| h.pid), Some(999999999));
        assert!(std::fs::read_to_string(d.path().join("lock")).unwrap().contains(&std::process::id().to_string()));
    }

    #[test]
    fn a_lock_a_dead_holder_s_child_keeps_is_reported_with_the_file_to_look_for() {
        let d = tempfile::tempdir().unwrap();
        let _copy = held_for_a_dead_holder(d.path());
        let err = RepoLock::acquire_within(d.path(), "ratchet sweep", Duration::from_millis(100)).unwrap_err();
        assert_eq!(err.kind, Kind::Locked);
        assert!(err.message.contains("ratchet pid 999999999") && err.message.contains("no longer running"), "{}", err.message);
        let path = d.path().join("lock").display().to_string();
        assert!(err.message.contains(&path), "{}", err.message);
        assert!(err.hint.as_deref().is_some_and(|h| h.contains(&format!("lsof {path}"))), "{:?}", err.hint);
    }

    #[test]
    fn stale_record_of_a_dead_process_does_not_block() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("lock"), r#"{"pid":999999999,"started":"yesterday","command":"ratchet x"}"#).unwrap();
        let lock = RepoLock::acquire(d.path(), "ratchet y").unwrap();
        assert_eq!(lock.stale().map(|h| h.pid), Some(999999999));
        let text = std::fs::read_to_string(d.path().join("lock")).unwrap();
        assert!(text.contains(&std::process::id().to_string()));
    }
}
