//! The `key=value` arguments the probe examples take (included by each with `#[path]`: an
//! example is its own crate).

use std::collections::HashMap;

pub struct Args(HashMap<String, String>);

impl Args {
    /// This process's arguments; one without `=` is ignored.
    pub fn from_env() -> Args {
        Args(std::env::args().skip(1).filter_map(|a| a.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect())
    }

    pub fn get(&self, key: &str) -> Option<&String> {
        self.0.get(key)
    }

    /// `key` as a number, `default` when absent; a value that is not a number stops the probe.
    #[allow(dead_code)] // not every probe reads numbers
    pub fn num(&self, key: &str, default: f64) -> f64 {
        self.get(key).map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{key}={v}: not a number")))
    }
}
