//! Ground-floor file helpers shared by every layer: atomic writes and the timestamp that
//! results and state files record. It imports nothing of ratchet's but `error` (so no module
//! needs `store` only to write a file).

use crate::error::{Result, WithPath};
use std::cell::Cell;
use std::io::Write;
use std::path::Path;

thread_local! {
    /// fsyncs made on this thread: what the parallel sweep's controller costs the disk per
    /// trial is counted by them (`ratchet::scale::inline`, `cargo bench --bench controller`).
    static SYNCS: Cell<u64> = const { Cell::new(0) };
}

/// How many fsyncs this thread has made through [`sync_all`] and [`sync_data`].
pub fn syncs() -> u64 {
    SYNCS.with(Cell::get)
}

/// `File::sync_all`, counted.
pub fn sync_all(f: &std::fs::File) -> std::io::Result<()> {
    SYNCS.with(|c| c.set(c.get() + 1));
    f.sync_all()
}

/// `File::sync_data`, counted.
pub fn sync_data(f: &std::fs::File) -> std::io::Result<()> {
    SYNCS.with(|c| c.set(c.get() + 1));
    f.sync_data()
}

/// The current time as results and state files record it (RFC 3339, UTC, whole seconds).
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// For `map_err` on an `io::Result` that stays one: the error names `path`, keeping its kind
/// (and its text, which says e.g. "No space left on device").
pub fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> std::io::Error + '_ {
    move |e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Write `bytes` to `path` through a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_then(path, bytes, || {})
}

/// [`write_atomic`] without its two fsyncs: a kill still leaves the old file or the new one,
/// but after a power cut the file may read as it was. For what is rebuilt or redone from a
/// synced record when it is lost (the id counter, a redone recording's journal).
pub fn write_atomic_lazy(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, false, || {})
}

/// [`write_atomic`], calling `before_rename` once the temporary file is complete.
pub fn write_atomic_then(path: &Path, bytes: &[u8], before_rename: impl FnOnce()) -> Result<()> {
    replace(path, bytes, true, before_rename)
}

/// Write through a temporary file in the same directory and a rename; with `sync`, the file
/// and then the directory are fsynced.
fn replace(path: &Path, bytes: &[u8], sync: bool, before_rename: impl FnOnce()) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_path(dir)?;
    let tmp = dir.join(format!(".{}.tmp.{}", path.file_name().unwrap().to_string_lossy(), std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp).with_path(&tmp)?;
        f.write_all(bytes).with_path(&tmp)?;
        if sync {
            sync_all(&f).with_path(&tmp)?;
        }
    }
    before_rename();
    std::fs::rename(&tmp, path).with_path(path)?;
    if sync {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = sync_all(&d);
        }
    }
    Ok(())
}
