//! How numbers and durations are written for people: one place for the formats that tables,
//! summaries and plots share (a ground-floor module: it imports nothing of ratchet's).

/// `x` with `digits` decimals, or more when that would hide a small value's leading figures.
pub fn sig(x: f64, digits: usize) -> String {
    let a = x.abs();
    if a == 0.0 || a >= 1.0 || !a.is_finite() {
        return format!("{x:.digits$}");
    }
    // Keep three significant figures for values below 1.
    let lead = (-a.log10()).floor() as usize;
    let d = digits.max(lead + 3).min(12);
    format!("{x:.d$}")
}

/// `1h02m`, `3m12s`, `4.2s`.
pub fn fmt_duration(secs: f64) -> String {
    let s = secs.max(0.0);
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    let total = s.round() as u64;
    let (h, m, sec) = (total / 3600, (total % 3600) / 60, total % 60);
    if h > 0 {
        format!("{h}h{m:02}m")
    } else {
        format!("{m}m{sec:02}s")
    }
}
