//! The one error type of ratchet: its kind picks the process exit code, and it carries a hint
//! that tells the user what to do about it.

use std::fmt;

/// Exit codes, documented in docs/cli.md. 0 means an experiment ran to a decision, whatever it was.
pub mod exit {
    /// A failure that is not one of the kinds below (I/O, the incumbent's benchmark failing, ...).
    pub const FAILURE: i32 = 1;
    /// The command line is wrong (clap uses 2 as well).
    pub const USAGE: i32 = 2;
    /// `ratchet.toml` is missing, unreadable or invalid.
    pub const CONFIG: i32 = 3;
    /// The repository is in a state where committing is unsafe or there is nothing to test.
    pub const REPO: i32 = 4;
    /// Another ratchet holds the repository's lock.
    pub const LOCKED: i32 = 5;
    /// The machine or the set-up failed, not the hypothesis (no space, no interpreter, command
    /// not found, the incumbent failing like the candidate): nothing was committed or recorded.
    pub const INFRASTRUCTURE: i32 = 6;
    /// `ratchet gate`: the head commit is a significant regression beyond the threshold.
    pub const REGRESSION: i32 = 7;
    /// Interrupted by SIGINT or SIGTERM (128 + SIGINT, as shells report it).
    pub const INTERRUPTED: i32 = 130;
}

/// What went wrong, at the level that decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Failure,
    Usage,
    Config,
    Repo,
    Locked,
    Infrastructure,
    Interrupted,
    Regression,
}

impl Kind {
    pub fn exit_code(self) -> i32 {
        match self {
            Kind::Failure => exit::FAILURE,
            Kind::Usage => exit::USAGE,
            Kind::Config => exit::CONFIG,
            Kind::Repo => exit::REPO,
            Kind::Locked => exit::LOCKED,
            Kind::Infrastructure => exit::INFRASTRUCTURE,
            Kind::Interrupted => exit::INTERRUPTED,
            Kind::Regression => exit::REGRESSION,
        }
    }
}

/// An error with a kind, a message, an optional hint and an optional chain of causes.
#[derive(Debug)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
    pub hint: Option<String>,
    pub source: Option<anyhow::Error>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), hint: None, source: None }
    }
    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(Kind::Failure, message)
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Kind::Usage, message)
    }
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(Kind::Config, message)
    }
    pub fn repo(message: impl Into<String>) -> Self {
        Self::new(Kind::Repo, message)
    }
    pub fn interrupted() -> Self {
        Self::new(Kind::Interrupted, "interrupted")
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn with_source(mut self, source: impl Into<anyhow::Error>) -> Self {
        self.source = Some(source.into());
        self
    }
    pub fn exit_code(&self) -> i32 {
        self.kind.exit_code()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(src) = &self.source {
            for cause in src.chain() {
                write!(f, "\n  caused by: {cause}")?;
            }
        }
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        // Keep an Error that was wrapped into anyhow somewhere down the stack.
        match e.downcast::<Error>() {
            Ok(inner) => inner,
            // "{:#}" prints the whole chain of causes on one line.
            Err(e) => Error::failure(format!("{e:#}")),
        }
    }
}

impl From<git2::Error> for Error {
    fn from(e: git2::Error) -> Self {
        Error::failure(format!("git: {}", e.message()))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::failure(format!("I/O error: {e}"))
    }
}

/// Name the file an I/O error is about: `I/O error on PATH: ...` instead of a bare `I/O error`.
pub trait WithPath<T> {
    fn with_path(self, path: impl AsRef<std::path::Path>) -> Result<T>;
}

impl<T> WithPath<T> for std::io::Result<T> {
    fn with_path(self, path: impl AsRef<std::path::Path>) -> Result<T> {
        self.map_err(|e| Error::failure(format!("I/O error on {}: {e}", path.as_ref().display())))
    }
}

/// Attach a message to a lower-level error, keeping it as the cause.
pub trait Context<T> {
    fn context(self, kind: Kind, message: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<anyhow::Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, kind: Kind, message: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::new(kind, message()).with_source(e))
    }
}
