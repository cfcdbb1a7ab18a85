//! Watches the work tree's directories with inotify from the status walk before the commit until
//! the check after the runs, so that check asks git about the paths that changed instead of
//! walking every file again. When the watcher cannot vouch for having seen everything (no
//! inotify, the watch limit, a queue overflow), the caller walks the whole tree as before.

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// Everything that changes a directory's entries or a file's content, mode or identity. Writes
/// through a shared memory mapping raise no inotify event; no benchmark harness writes the
/// repository's tracked files that way, and `RATCHET_FULL_SCAN=1` turns the watcher off.
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
        | WatchMask::DONT_FOLLOW
        | WatchMask::EXCL_UNLINK
}

/// Whether the watcher may stand in for the second walk (off with `RATCHET_FULL_SCAN=1`).
pub fn enabled() -> bool {
    std::env::var_os("RATCHET_FULL_SCAN").is_none_or(|v| v.is_empty() || v == "0")
}

/// An inotify instance with a watch on directories of the work tree, each named by its path
/// relative to the root (`""` for the root itself).
pub struct Watch {
    /// Always `Some` until dropped.
    inotify: Option<Inotify>,
    dirs: HashMap<WatchDescriptor, String>,
    /// A watch could not be added: the watcher has not seen everything.
    broken: bool,
}

/// How many directories ratchet may watch: a quarter of the user's inotify watches
/// (`fs.inotify.max_user_watches`, shared with editors and other tools that watch files), so an
/// experiment never starves them; a larger tree is walked whole after the runs instead.
pub fn budget() -> usize {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches").ok().and_then(|t| t.trim().parse::<usize>().ok()).unwrap_or(8192) / 4
}

impl Watch {
    pub fn new() -> Option<Watch> {
        Some(Watch { inotify: Some(Inotify::init().ok()?), dirs: HashMap::new(), broken: false })
    }

    /// Watch `rel` (a directory under `root`); a failure (the watch limit, the directory gone)
    /// makes the watcher unusable rather than silently blind there.
    pub fn add(&mut self, root: &Path, rel: &str) {
        let full = if rel.is_empty() { root.to_path_buf() } else { root.join(rel) };
        let Some(inotify) = self.inotify.as_ref() else { return };
        match inotify.watches().add(&full, mask()) {
            Ok(wd) => {
                self.dirs.insert(wd, rel.to_string());
            }
            Err(_) => self.broken = true,
        }
    }

    /// The paths (relative to the root) that saw any change since their directory was watched,
    /// sorted; `None` when the watcher cannot vouch for having seen every change (a watch was
    /// not added, or the kernel's event queue overflowed).
    pub fn changed(mut self) -> Option<BTreeSet<String>> {
        if self.broken {
            return None;
        }
        let inotify = self.inotify.as_mut()?;
        let mut out = BTreeSet::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let events = match inotify.read_events(&mut buf) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return None,
            };
            for e in events {
                if e.mask.contains(EventMask::Q_OVERFLOW) {
                    return None;
                }
                if e.mask.contains(EventMask::IGNORED) {
                    continue;
                }
                let Some(dir) = self.dirs.get(&e.wd) else { continue };
                let path = match e.name {
                    Some(name) => {
                        // A name that is not UTF-8 cannot be asked about by path: walk it all.
                        let name = name.to_str()?;
                        if dir.is_empty() {
                            name.to_string()
                        } else {
                            format!("{dir}/{name}")
                        }
                    }
                    // The watched directory itself was deleted or moved.
                    None => dir.clone(),
                };
                if !path.is_empty() {
                    out.insert(path);
                }
            }
        }
        Some(out)
    }
}

impl Drop for Watch {
    /// Closing an inotify descriptor waits for the kernel to retire its watches (an RCU grace
    /// period, ~10 ms of waiting, no CPU): done on a thread of its own, off the experiment's path.
    fn drop(&mut self) {
        if let Some(inotify) = self.inotify.take() {
            // Should no thread start, the closure (and the descriptor) is dropped right here.
            let _ = std::thread::Builder::new().name("ratchet-unwatch".into()).spawn(move || drop(inotify));
        }
    }
}
