//! Hostile input, property-based: parsers, the measuring step, the trace reader.

mod measuring;
mod parsers;
mod traces;

/// Proptest cases per property: `PROPTEST_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Apply byte flips, truncation and splices to a real capture: the malformed inputs a decoder
/// actually meets are mostly near-valid.
fn mutate(base: &[u8], flips: &[(usize, u8)], cut: usize) -> Vec<u8> {
    let mut v = base.to_vec();
    for &(pos, b) in flips {
        let i = pos % v.len();
        v[i] ^= b;
    }
    v.truncate(cut % (v.len() + 1));
    v
}
