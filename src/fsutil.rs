//! Ground-floor file helpers shared by every layer: atomic writes and the timestamp that
//! results and state files record. It imports nothing of ratchet's but `error` (so no module
//! needs `store` only to write a file).

use crate::error::{Result, WithPath};
use std::io::Write;
use std::path::Path;

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

/// [`write_atomic`], calling `before_rename` once the temporary file is complete.
pub fn write_atomic_then(path: &Path, bytes: &[u8], before_rename: impl FnOnce()) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_path(dir)?;
    let tmp = dir.join(format!(".{}.tmp.{}", path.file_name().unwrap().to_string_lossy(), std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp).with_path(&tmp)?;
        f.write_all(bytes).with_path(&tmp)?;
        f.sync_all().with_path(&tmp)?;
    }
    before_rename();
    std::fs::rename(&tmp, path).with_path(path)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
