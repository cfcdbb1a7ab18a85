//! Sample summaries the procedure and the noise history share: mean and sd, median, robust sd.

/// The robust sd's factor: 1 / Phi^-1(3/4), which makes a normal sample's median absolute
/// deviation an estimate of its sd.
pub const MAD_TO_SD: f64 = 1.4826;

/// The sample mean and sd (n - 1) of `d`; sd 0 for fewer than two values.
pub(crate) fn mean_sd(d: &[f64]) -> (f64, f64) {
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let var = if d.len() > 1 { d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

pub(crate) fn median(v: &[f64]) -> f64 {
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
pub(crate) fn robust_sd(d: &[f64]) -> f64 {
    let med = median(d);
    MAD_TO_SD * median(&d.iter().map(|x| (x - med).abs()).collect::<Vec<_>>())
}
