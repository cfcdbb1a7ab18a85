//! Reading files that a benchmark names (its HLO dump, its trace, its result file): only regular
//! files inside the places the run may write, opened without blocking and read with a size cap,
//! so a path to a FIFO, `/dev/zero` or a gzip bomb can neither hang ratchet nor exhaust memory.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Largest result file read (a runaway benchmark).
pub const MAX_RESULT_BYTES: u64 = 64 << 20;
/// Largest HLO text dump read.
pub const MAX_HLO_BYTES: u64 = 256 << 20;
/// Largest trace file read as it is on disk (`.xplane.pb`, or a compressed `.trace.json.gz`).
pub const MAX_TRACE_BYTES: u64 = 1 << 30;
/// Largest decompressed `.trace.json` text: a JSON trace takes several times its size once
/// parsed, so this bounds the reader's memory at a few GiB.
pub const MAX_TRACE_JSON_BYTES: u64 = 256 << 20;

/// Why a file was not read; the message names the path and the limit or rule it broke.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SafeReadError(pub String);

fn err(msg: impl Into<String>) -> SafeReadError {
    SafeReadError(msg.into())
}

/// Open `path` for reading without ever blocking (O_NONBLOCK: a FIFO with no writer returns at
/// once) and only if what was opened is a regular file (checked on the open descriptor, so a
/// swap of the path after a check cannot slip a device in).
pub fn open_regular(path: &Path) -> Result<File, SafeReadError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| err(format!("cannot open {}: {e}", path.display())))?;
    let meta = f.metadata().map_err(|e| err(format!("cannot stat {}: {e}", path.display())))?;
    if !meta.file_type().is_file() {
        return Err(err(format!(
            "{} is not a regular file (a FIFO, device or directory); ratchet reads only regular files",
            path.display()
        )));
    }
    Ok(f)
}

/// The git blob id of the regular file at `path` (its bytes, no filters), read through a
/// descriptor opened without blocking: a FIFO or device put where a tracked file was is an
/// error, never a hang or an endless read.
pub fn hash_blob(path: &Path) -> Result<git2::Oid, SafeReadError> {
    use std::os::fd::AsRawFd;
    let f = open_regular(path)?;
    // The open descriptor, by its /proc name: what was checked is what is hashed.
    let fd_path = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
    git2::Oid::hash_file(git2::ObjectType::Blob, &fd_path).map_err(|e| err(format!("cannot hash {}: {}", path.display(), e.message())))
}

/// Read at most `cap` bytes of the regular file at `path`; a larger file is an error naming the cap.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, SafeReadError> {
    let f = open_regular(path)?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > cap {
        return Err(too_big(path, len, cap, ""));
    }
    let mut buf = Vec::with_capacity(len as usize);
    // A file that grows while being read is still cut at the cap.
    read_bounded(f, cap + 1, &mut buf).map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
    if buf.len() as u64 > cap {
        return Err(too_big(path, buf.len() as u64, cap, "at least "));
    }
    Ok(buf)
}

/// [`read_capped`] as UTF-8 text (invalid bytes replaced).
pub fn read_text_capped(path: &Path, cap: u64) -> Result<String, SafeReadError> {
    read_capped(path, cap).map(|b| String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Decompress the gzip file at `path` into text, stopping with an error at `limit` decompressed
/// bytes (a 1.5 MB gzip bomb inflates to gigabytes).
pub fn read_gzip_text_capped(path: &Path, limit: u64) -> Result<String, SafeReadError> {
    let f = open_regular(path)?;
    let mut out = Vec::new();
    read_bounded(flate2::read::GzDecoder::new(f), limit + 1, &mut out)
        .map_err(|e| err(format!("{} is not a readable gzip file: {e}", path.display())))?;
    if out.len() as u64 > limit {
        return Err(err(format!(
            "{} decompresses to more than {} MiB, the limit for a JSON trace; capture fewer iterations (RATCHET_PROFILE_ITERS) \
             or write an .xplane.pb",
            path.display(),
            limit >> 20
        )));
    }
    String::from_utf8(out).map_err(|_| err(format!("{} is not UTF-8 JSON", path.display())))
}

/// Read at most `max` bytes into `out`, growing it by at most what is left of `max` (a plain
/// `read_to_end` doubles its buffer, so a cap of N could cost 2N).
fn read_bounded(mut r: impl Read, max: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let room = max.saturating_sub(out.len() as u64);
        if room == 0 {
            return Ok(());
        }
        let want = buf.len().min(room as usize);
        let n = match r.read(&mut buf[..want]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if out.capacity() - out.len() < n {
            let grow = out.len().max(1 << 20).min((max - out.len() as u64) as usize).max(n);
            out.reserve_exact(grow);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

pub(crate) fn too_big(path: &Path, len: u64, cap: u64, at_least: &str) -> SafeReadError {
    err(format!("{} is {at_least}{len} bytes, more than the {} MiB ratchet reads from it", path.display(), cap >> 20))
}

/// Check that `path`, with symlinks resolved, lies inside one of `roots` (the run's output
/// directory, the checkout); returns the resolved path. Paths elsewhere (`/dev/zero`,
/// `/etc/passwd`, a FIFO in /tmp) are refused before anything opens them.
pub fn confine(path: &Path, roots: &[&Path]) -> Result<PathBuf, SafeReadError> {
    let real = path.canonicalize().map_err(|e| err(format!("cannot resolve {}: {e}", path.display())))?;
    for root in roots {
        if let Ok(r) = root.canonicalize() {
            if real.starts_with(&r) {
                return Ok(real);
            }
        }
    }
    let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    Err(err(format!(
        "{} lies outside the run's output directory and the checkout ({}); write it under $RATCHET_OUT",
        path.display(),
        list.join(", ")
    )))
}

/// Check a path a benchmark named as its trace: inside `roots`, and a regular file, or a
/// directory whose entries (to a bounded depth and count) are regular files or directories, so
/// the trace reader meets no FIFO or device however it walks it.
pub fn check_trace_path(path: &Path, roots: &[&Path]) -> Result<PathBuf, SafeReadError> {
    let real = confine(path, roots)?;
    let meta = std::fs::metadata(&real).map_err(|e| err(format!("cannot stat {}: {e}", real.display())))?;
    if meta.is_file() {
        if meta.len() > MAX_TRACE_BYTES {
            return Err(too_big(&real, meta.len(), MAX_TRACE_BYTES, ""));
        }
        return Ok(real);
    }
    if !meta.is_dir() {
        return Err(err(format!("{} is not a regular file or a directory", path.display())));
    }
    let mut stack = vec![(real.clone(), 0usize)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|e| err(format!("cannot list {}: {e}", dir.display())))?;
        for e in rd.flatten() {
            seen += 1;
            if seen > 100_000 {
                return Err(err(format!("{} holds more than 100000 entries; point \"trace\" at the capture", path.display())));
            }
            let p = e.path();
            let m = std::fs::metadata(&p).map_err(|e| err(format!("cannot stat {}: {e}", p.display())))?;
            if m.is_dir() {
                confine(&p, roots)?;
                if depth < 8 {
                    stack.push((p, depth + 1));
                }
            } else if m.is_file() {
                confine(&p, roots)?;
                if m.len() > MAX_TRACE_BYTES {
                    return Err(too_big(&p, m.len(), MAX_TRACE_BYTES, ""));
                }
            } else {
                return Err(err(format!(
                    "{} is not a regular file (a FIFO, socket or device); ratchet reads only regular files",
                    p.display()
                )));
            }
        }
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn fifo_and_devices_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("hlo.txt");
        mkfifo(&fifo);
        let e = read_capped(&fifo, 1 << 20).unwrap_err();
        assert!(e.0.contains("not a regular file"), "{e}");
        let e = read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.0.contains("not a regular file"), "{e}");
        let e = check_trace_path(d.path(), &[d.path()]).unwrap_err();
        assert!(e.0.contains("not a regular file"), "{e}");
    }

    #[test]
    fn outside_paths_and_oversize_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = confine(Path::new("/etc/hostname"), &[d.path()]).unwrap_err();
        assert!(e.0.contains("outside"), "{e}");
        std::os::unix::fs::symlink("/dev/zero", d.path().join("link")).unwrap();
        assert!(confine(&d.path().join("link"), &[d.path()]).is_err(), "a symlink out is followed and refused");
        let big = d.path().join("big");
        std::fs::write(&big, vec![b'x'; 2000]).unwrap();
        let e = read_capped(&big, 1000).unwrap_err();
        assert!(e.0.contains("2000 bytes"), "{e}");
        assert_eq!(read_capped(&big, 2000).unwrap().len(), 2000);
    }

    #[test]
    fn gzip_bomb_stops_at_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.trace.json.gz");
        let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&p).unwrap(), flate2::Compression::best());
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..64 {
            enc.write_all(&zeros).unwrap();
        }
        enc.finish().unwrap();
        let e = read_gzip_text_capped(&p, 8 << 20).unwrap_err();
        assert!(e.0.contains("more than 8 MiB"), "{e}");
        assert_eq!(read_gzip_text_capped(&p, 64 << 20).unwrap().len(), 64 << 20);
    }
}
