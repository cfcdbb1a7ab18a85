//! Output that a closed pipe cannot abort: when stdout or stderr is not a terminal (a pipe to
//! `head`, a file), ratchet's end of it becomes a pipe drained by a thread that forwards to the
//! real one and silently drops what can no longer be written (EPIPE, ENOSPC). `println!` then
//! never fails, so `ratchet "..." | head -1` finishes, records and exits as it would have.

use std::io::{IsTerminal, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The relays of stdout and stderr; [`Relay::finish`] flushes them before the process exits.
pub struct Relay {
    streams: Vec<(RawFd, std::sync::mpsc::Receiver<()>)>,
}

impl Relay {
    /// Put a relay in front of each of stdout and stderr that is not a terminal.
    pub fn install() -> Relay {
        let mut streams = vec![];
        for fd in [1, 2] {
            let is_tty = if fd == 1 { std::io::stdout().is_terminal() } else { std::io::stderr().is_terminal() };
            if !is_tty {
                if let Some(done) = relay(fd) {
                    streams.push((fd, done));
                }
            }
        }
        Relay { streams }
    }

    /// Flush what was printed through the relays (waiting at most 2 s for a slow reader).
    pub fn finish(self) {
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        for (fd, done) in self.streams {
            // Pointing the fd at /dev/null closes the relay pipe's last write end: the thread
            // sees end-of-file once it has forwarded everything.
            if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
                // SAFETY: dup2 onto a standard fd this process owns.
                unsafe {
                    libc::dup2(null.as_raw_fd(), fd);
                }
            }
            let _ = done.recv_timeout(Duration::from_secs(2));
        }
    }
}

fn relay(fd: RawFd) -> Option<std::sync::mpsc::Receiver<()>> {
    let mut fds = [0; 2];
    // SAFETY: plain fd syscalls; every fd created here is owned below or closed on failure.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return None;
        }
        let (r, w) = (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]));
        let orig = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
        if orig < 0 {
            return None; // the stream is closed already; writes to it are dropped by std
        }
        let orig = OwnedFd::from_raw_fd(orig);
        if libc::dup2(w.as_raw_fd(), fd) < 0 {
            return None;
        }
        drop(w);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = std::fs::File::from(r);
            let mut out = std::fs::File::from(orig);
            let mut buf = vec![0u8; 16 << 10];
            let mut open = true;
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        // After the first failed write the rest is drained and dropped.
                        if open {
                            open = out.write_all(&buf[..n]).is_ok();
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(());
        });
        Some(rx)
    }
}
