//! One pass over the work tree, in parallel threads, that settles by stat data alone what a
//! status walk settles the same way: every tracked file whose stat data match its index entry is
//! unchanged (git's own rule, racy entries excepted), and every name a directory holds that the
//! index does not is a candidate. Only the paths it cannot settle go to libgit2's status,
//! limited to them, which gives the exact answer. It arms the work-tree watcher on the way.

use super::watch::Watch;
use git2::{Index, Repository};
use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Index entry flags. Source: libgit2 include/git2/index.h (`GIT_INDEX_ENTRY_VALID`,
/// `GIT_INDEX_ENTRY_STAGEMASK`/`STAGESHIFT`, and the extended `INTENT_TO_ADD`, `SKIP_WORKTREE`).
const ASSUME_VALID: u16 = 0x8000;
const STAGE_MASK: u16 = 0x3000;
const INTENT_TO_ADD: u16 = 1 << 13;
const SKIP_WORKTREE: u16 = 1 << 14;
/// File modes of index entries (git's object modes).
const MODE_TYPE: u32 = 0o170000;
const MODE_LINK: u32 = 0o120000;
const MODE_GITLINK: u32 = 0o160000;

/// Below this many tracked files one thread is as fast as two.
const PARALLEL_FROM: usize = 2000;

/// What the pass found.
pub struct Survey {
    /// Paths libgit2 must settle: tracked files whose stat data differ from the index (or are
    /// racily clean, conflicted, intent-to-add, or outside a sparse cone yet present), and
    /// names in the work tree the index does not hold (a directory as `dir/`).
    pub suspects: Vec<String>,
    /// Untracked directories found (`dir/`): to be watched when they are not ignored.
    pub untracked_dirs: Vec<String>,
    /// Watches on every tracked directory, added before the directory was read.
    pub watch: Option<Watch>,
    /// Tracked files with more than one link: a write through a name outside the watched
    /// directories raises no event in them, so these are checked by content after the runs.
    pub linked: Vec<String>,
}

/// The stat data of one tracked file, as the index recorded it.
struct Tracked<'a> {
    path: &'a str,
    /// Where its name starts in `path`.
    name_at: usize,
    mode: u32,
    size: u32,
    mtime: (i32, u32),
    ctime: (i32, u32),
    ino: u32,
    /// Settled by libgit2 whatever the stat data say.
    suspect: bool,
    sparse: bool,
}

/// A directory holding tracked files (`""` is the root) and those files.
struct Dir<'a> {
    rel: &'a str,
    files: Vec<Tracked<'a>>,
}

/// Survey the work tree of `repo` (rooted at `root`) against `index`; `skip` says which
/// top-level names are not the work tree's (ratchet's own directories). With `watch`, every
/// tracked directory is watched before it is read. `None` when a tracked directory is no longer
/// a directory (a symbolic link or a file in its place) or a path is not UTF-8: the caller walks
/// the tree with libgit2.
pub fn survey(repo: &Repository, index: &Index, root: &Path, skip: &[&str], watch: Option<Watch>) -> Option<Survey> {
    let filemode = repo.config().and_then(|c| c.get_bool("core.filemode")).unwrap_or(true);
    // An entry changed within the index file's own timestamp may be racily clean (git's rule).
    let index_mtime = std::fs::metadata(repo.path().join("index"))
        .ok()
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.mtime() as i32, m.mtime_nsec() as u32)
        })
        .unwrap_or((i32::MAX, 0));
    let entries: Vec<git2::IndexEntry> = index.iter().collect();
    let mut paths: Vec<&str> = Vec::with_capacity(entries.len());
    for e in &entries {
        paths.push(std::str::from_utf8(&e.path).ok()?);
    }
    // Every tracked path, and every directory above one (slices of the paths, no copies).
    let mut tracked: HashSet<&str> = HashSet::with_capacity(paths.len() * 2);
    let mut dir_of: HashMap<&str, usize> = HashMap::new();
    let mut dirs: Vec<Dir> = vec![Dir { rel: "", files: vec![] }];
    dir_of.insert("", 0);
    let mut last: (&str, usize) = ("", 0);
    for (e, path) in entries.iter().zip(&paths) {
        let path: &str = path;
        tracked.insert(path);
        let name_at = path.rfind('/').map_or(0, |i| i + 1);
        let parent = &path[..name_at.saturating_sub(1)];
        let d = if parent == last.0 {
            last.1
        } else {
            let d = match dir_of.get(parent) {
                Some(&d) => d,
                None => {
                    // A new directory: it and the directories above it not met yet are tracked
                    // names, and each is read (also one holding only directories).
                    let mut up = parent;
                    while !dir_of.contains_key(up) {
                        tracked.insert(up);
                        dirs.push(Dir { rel: up, files: vec![] });
                        dir_of.insert(up, dirs.len() - 1);
                        up = &up[..up.rfind('/').unwrap_or(0)];
                    }
                    dir_of[parent]
                }
            };
            last = (parent, d);
            d
        };
        if e.mode & MODE_TYPE == MODE_GITLINK {
            // Submodules are not part of a hypothesis (the status walks exclude them); a
            // gitlink's directory is the submodule's own work tree, not read here.
            continue;
        }
        let mtime = (e.mtime.seconds(), e.mtime.nanoseconds());
        let racy = mtime >= index_mtime;
        let suspect = racy || e.flags & (STAGE_MASK | ASSUME_VALID) != 0 || e.flags_extended & INTENT_TO_ADD != 0;
        dirs[d].files.push(Tracked {
            path,
            name_at,
            mode: e.mode,
            size: e.file_size,
            mtime,
            ctime: (e.ctime.seconds(), e.ctime.nanoseconds()),
            ino: e.ino,
            suspect,
            sparse: e.flags_extended & SKIP_WORKTREE != 0,
        });
    }
    dirs.sort_by(|a, b| a.rel.cmp(b.rel));

    let mut watch = watch.filter(|_| dirs.len() <= super::watch::budget());
    if let Some(w) = watch.as_mut() {
        for d in &dirs {
            w.add(root, d.rel);
        }
    }

    let files: usize = dirs.iter().map(|d| d.files.len()).sum();
    let threads = if files < PARALLEL_FROM { 1 } else { std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4) };
    // Contiguous shares of about equal numbers of files (sorted paths keep a directory's
    // neighbours together).
    let mut shares: Vec<Vec<&Dir>> = vec![vec![]; threads];
    let per = files.div_ceil(threads).max(1);
    let mut acc = 0;
    for d in &dirs {
        let k = (acc / per).min(threads - 1);
        acc += d.files.len().max(1);
        shares[k].push(d);
    }
    let tracked = &tracked;
    let results: Vec<Option<Share>> = std::thread::scope(|s| {
        let handles: Vec<_> = shares.into_iter().map(|share| s.spawn(move || read_share(root, &share, tracked, skip, filemode))).collect();
        handles.into_iter().map(|h| h.join().ok().flatten()).collect()
    });
    let mut suspects = vec![];
    let mut untracked_dirs = vec![];
    let mut linked = vec![];
    for r in results {
        let (s, u, l) = r?;
        suspects.extend(s);
        untracked_dirs.extend(u);
        linked.extend(l);
    }
    suspects.sort();
    untracked_dirs.sort();
    Some(Survey { suspects, untracked_dirs, watch, linked })
}

/// One thread's findings: suspects, untracked directories, hard-linked tracked files.
type Share = (Vec<String>, Vec<String>, Vec<String>);

/// One thread's share: lstat each tracked file against its entry, read each directory for
/// names the index does not hold. Returns (suspects, untracked directories), or `None` when a
/// tracked directory is something else now.
fn read_share(root: &Path, share: &[&Dir], tracked: &HashSet<&str>, skip: &[&str], filemode: bool) -> Option<Share> {
    let mut suspects = vec![];
    let mut untracked_dirs = vec![];
    let mut linked = vec![];
    let mut name = Vec::with_capacity(256);
    let mut path = String::with_capacity(256);
    for dir in share {
        let rel = dir.rel;
        let full = if rel.is_empty() { root.to_path_buf() } else { root.join(rel) };
        // A tracked directory is opened without following a symbolic link in its place (its
        // ancestors are tracked directories too, each checked the same way).
        let fd = open_dir(&full, !rel.is_empty());
        if fd < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT) {
            return None;
        }
        for t in &dir.files {
            name.clear();
            name.extend_from_slice(&t.path.as_bytes()[t.name_at..]);
            name.push(0);
            let (ok, links) = settled(fd, &name, t, filemode);
            if !ok {
                suspects.push(t.path.to_string());
            }
            if links > 1 {
                linked.push(t.path.to_string());
            }
        }
        if fd >= 0 {
            // SAFETY: fd came from open(2) above and is closed once.
            unsafe { libc::close(fd) };
        }
        let Ok(entries) = std::fs::read_dir(&full) else { continue };
        for e in entries.flatten() {
            let os = e.file_name();
            if os.as_bytes() == b".git" {
                continue;
            }
            let Some(n) = os.to_str() else {
                // A name git would list but this pass cannot spell: let libgit2 walk.
                return None;
            };
            if rel.is_empty() && skip.contains(&n) {
                continue;
            }
            path.clear();
            if !rel.is_empty() {
                path.push_str(rel);
                path.push('/');
            }
            path.push_str(n);
            if tracked.contains(path.as_str()) {
                continue;
            }
            let is_dir = match e.file_type() {
                Ok(t) => t.is_dir(),
                Err(_) => std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir()),
            };
            if is_dir {
                suspects.push(format!("{path}/"));
                untracked_dirs.push(format!("{path}/"));
            } else {
                suspects.push(path.clone());
            }
        }
    }
    Some((suspects, untracked_dirs, linked))
}

/// An `O_PATH` descriptor of a directory (for `fstatat` relative to it), or -1 with errno set;
/// with `nofollow`, a symbolic link in its place fails.
fn open_dir(path: &Path, nofollow: bool) -> i32 {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return -1 };
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | if nofollow { libc::O_NOFOLLOW } else { 0 };
    // SAFETY: c is a valid NUL-terminated path.
    unsafe { libc::open(c.as_ptr(), flags) }
}

/// Whether a tracked file is unchanged by its stat data: it exists (or is absent on purpose,
/// outside a sparse cone), has the type, exec bit, size, mtime, ctime and inode the index
/// recorded. Anything else, or any doubt, leaves it to libgit2. Also returns its link count
/// (0 when it was not looked at).
fn settled(dirfd: i32, name: &[u8], t: &Tracked, filemode: bool) -> (bool, u64) {
    if dirfd < 0 {
        return (!t.suspect && t.sparse, 0);
    }
    // SAFETY: st is plain data filled by fstatat; the name is NUL-terminated.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatat(dirfd, name.as_ptr() as *const libc::c_char, &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if rc != 0 {
        return (!t.suspect && t.sparse, 0);
    }
    let links = st.st_nlink as u64;
    (!t.suspect && same_stat(&st, t, filemode), links)
}

/// Whether `st` is what the index recorded for `t`.
fn same_stat(st: &libc::stat, t: &Tracked, filemode: bool) -> bool {
    if t.sparse {
        return false;
    }
    let kind = st.st_mode & libc::S_IFMT;
    let want_link = t.mode & MODE_TYPE == MODE_LINK;
    if want_link != (kind == libc::S_IFLNK) || (!want_link && kind != libc::S_IFREG) {
        return false;
    }
    if filemode && !want_link && ((t.mode & 0o100 != 0) != (st.st_mode & 0o100 != 0)) {
        return false;
    }
    // The index keeps 32-bit truncations of these (git's on-disk format).
    st.st_size as u32 == t.size
        && (st.st_mtime as i32, st.st_mtime_nsec as u32) == t.mtime
        && (st.st_ctime as i32, st.st_ctime_nsec as u32) == t.ctime
        && st.st_ino as u32 == t.ino
}
