//! Sample summaries the procedure and the noise history share: mean and sd, median, robust sd,
//! and the gross-outlier band built on them.

/// The robust sd's factor: 1 / Phi^-1(3/4), which makes a normal sample's median absolute
/// deviation an estimate of its sd.
pub const MAD_TO_SD: f64 = 1.4826;

/// The sample mean and sd (n - 1) of `d`; sd 0 for fewer than two values.
pub fn mean_sd(d: &[f64]) -> (f64, f64) {
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let var = if d.len() > 1 { d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

/// The median of `v` (the mean of the middle two for an even count; NaN when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The robust sd of `d`: [`MAD_TO_SD`] x its median absolute deviation from the median (the sd
/// of a normal sample, which one wild value cannot move). NaN when `d` is empty.
pub fn robust_sd(d: &[f64]) -> f64 {
    let med = median(d);
    MAD_TO_SD * median(&d.iter().map(|x| (x - med).abs()).collect::<Vec<_>>())
}

/// How far from its median a pair of the batch `d` may lie before it is a gross outlier: `k`
/// sds of the history's `sd`, or from [`ROBUST_BAND_PAIRS`] pairs of the batch's own robust sd
/// when larger (under a noise jump a band in history sds would set aside ordinary pairs of the
/// wider noise). The two phases' outlier rule, `auto`'s hand-over and the history's short
/// batches all read it.
pub(crate) fn outlier_band(k: f64, sd: f64, d: &[f64]) -> f64 {
    if d.len() >= super::levels::ROBUST_BAND_PAIRS {
        k * sd.max(robust_sd(d))
    } else {
        k * sd
    }
}
