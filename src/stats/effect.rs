//! The one estimate of "how much faster" that every view reports: the Hodges-Lehmann estimate
//! of the paired log-ratios with its distribution-free (Wilcoxon signed-rank) interval, so a few
//! wild runs cannot carry the headline number. The keep/revert decision is made elsewhere
//! (`sequential`); this is what is shown.

use super::Direction;

/// A paired effect on the log scale (positive = the candidate is better), with the interval
/// that matches it and the coverage that interval really has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Effect {
    /// Pairs behind it.
    pub n: usize,
    /// Median of the Walsh averages (d_i + d_j) / 2, i <= j.
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// The interval's exact coverage under the signed-rank null (at least the level asked for,
    /// except with too few pairs: then the whole range of the Walsh averages, at what it has).
    pub coverage: f64,
}

impl Effect {
    /// The estimate and interval as percent speed-ups.
    pub fn pct(&self) -> (f64, f64, f64) {
        (super::pct(self.estimate), super::pct(self.low), super::pct(self.high))
    }
}

/// Hodges-Lehmann estimate of `d` and its signed-rank interval at `level` (two-sided, e.g. 0.9),
/// its two ends equally likely to miss; `None` without a finite value. Hodges & Lehmann (1963);
/// the interval is the one of Hollander & Wolfe, "Nonparametric Statistical Methods", ch. 3:
/// Walsh averages k and N + 1 - k.
pub fn hodges_lehmann(d: &[f64], level: f64) -> Option<Effect> {
    hodges_lehmann_tails(d, level, 0.5)
}

/// The share of a decision's interval's miss probability (1 - level) that its lower end carries:
/// at 96%, 0.5% below and 3.5% above. A decision stops when its pairs look good, so a long one's
/// pairs lean toward a gain and its equal-tailed interval misses the truth almost only by lying
/// above it (99-100% of the misses under no gain). Giving the lower end the smaller tail keeps
/// the stated level at any fixed number of pairs and lifts the coverage after the stop where the
/// stop is what bends it, for intervals a little wider under a gain. A row without a keep gives
/// both ends this share ([`stopped_interval`]).
pub const DECISION_LOWER_SHARE: f64 = 0.125;

/// [`hodges_lehmann`] with the interval of a decision that tested `d` for a gain (positive:
/// better): the lower end carries [`DECISION_LOWER_SHARE`] of the miss probability.
pub fn decision_interval(d: &[f64], level: f64) -> Option<Effect> {
    hodges_lehmann_tails(d, level, DECISION_LOWER_SHARE)
}

/// The interval a row shows for decision `d` over all its pairs' log-ratios `logs`, at the
/// decision's level. A keep's is [`decision_interval`]: its stop came on pairs that looked good,
/// so its lower end carries the small share. A row without a keep carries the small share at both
/// ends ([`stopped_interval`]) and its lower end reaches down to no gain. A futility stop comes on
/// pairs that look bad, which bends the upper end below a real gain; a decision that ran long
/// without a keep went on because its first pairs looked like a gain, so its interval leans that
/// way. A rule that found no gain gives no grounds for a lower end above none, and each end
/// further out only misses less, so the stated level holds at any fixed number of pairs.
pub fn shown_interval(logs: &[f64], d: &super::Decision) -> Option<Effect> {
    if d.verdict == super::Verdict::Keep {
        return decision_interval(logs, d.ci_level);
    }
    let e = stopped_interval(logs, d.ci_level)?;
    Some(Effect { low: e.low.min(0.0), ..e })
}

/// The interval of a decision that stopped without a keep: each end misses with at most
/// [`DECISION_LOWER_SHARE`] of the miss probability `1 - level` (0.5% each at 96%), so at a fixed
/// number of pairs it covers 1 - 2 x that share of the miss (99% at 96%): the stated `level` is
/// what it keeps after the stop. `coverage` is the fixed-sample one.
pub fn stopped_interval(d: &[f64], level: f64) -> Option<Effect> {
    hodges_lehmann_tails(d, 1.0 - 2.0 * DECISION_LOWER_SHARE * (1.0 - level), 0.5)
}

/// Hodges-Lehmann estimate of `d` and its signed-rank interval at `level`, the lower end missing
/// with probability at most `lower_share` x (1 - level) and the upper end with the rest: each end
/// the Walsh average whose one-sided miss probability under the signed-rank null fits its share.
/// Where the lower end cannot be that sure (too few pairs), it is the smallest Walsh average and
/// the upper end gets what is left; with too few pairs for `level` at all, the whole range, and
/// `coverage` says what it has.
pub fn hodges_lehmann_tails(d: &[f64], level: f64, lower_share: f64) -> Option<Effect> {
    let mut d: Vec<f64> = d.iter().copied().filter(|x| x.is_finite()).collect();
    if d.is_empty() {
        return None;
    }
    d.sort_by(f64::total_cmp);
    let n = d.len();
    let total = n * (n + 1) / 2;
    let estimate =
        if total % 2 == 1 { walsh_kth(&d, total / 2 + 1) } else { (walsh_kth(&d, total / 2) + walsh_kth(&d, total / 2 + 1)) / 2.0 };
    let tail = signed_rank_cdf(n);
    // The largest k whose end misses with at most `allowed`; k = 1 (the extreme average) at the
    // least.
    let k_for = |allowed: f64| {
        let mut k = 1;
        while k < total / 2 && tail(k) <= allowed + 0.5e-12 {
            k += 1;
        }
        k
    };
    let (miss, share) = (1.0 - level, lower_share.clamp(0.0, 1.0));
    let k_low = k_for(share * miss);
    // A lower end that could not be as sure as its share leaves the upper end what is left.
    let upper = if tail(k_low - 1) > share * miss + 0.5e-12 { miss - tail(k_low - 1) } else { (1.0 - share) * miss };
    let k_high = k_for(upper);
    let coverage = 1.0 - tail(k_low - 1) - tail(k_high - 1);
    Some(Effect { n, estimate, low: walsh_kth(&d, k_low), high: walsh_kth(&d, total + 1 - k_high), coverage })
}

/// P(W+ <= w) for the signed-rank statistic of `n` pairs under the null: exact (counting the
/// subsets of ranks) up to 60 pairs, the normal approximation with continuity correction above.
fn signed_rank_cdf(n: usize) -> impl Fn(usize) -> f64 {
    let total = n * (n + 1) / 2;
    let exact = (n <= 60).then(|| {
        // Probabilities rather than counts: 2^60 subsets would overflow.
        let mut p = vec![0.0f64; total + 1];
        p[0] = 1.0;
        for r in 1..=n {
            for w in (r..=total).rev() {
                p[w] = (p[w] + p[w - r]) / 2.0;
            }
            for w in (0..r).rev() {
                p[w] /= 2.0;
            }
        }
        let mut c = 0.0;
        p.iter()
            .map(|x| {
                c += x;
                c
            })
            .collect::<Vec<f64>>()
    });
    move |w: usize| match &exact {
        Some(cdf) => cdf[w.min(total)],
        None => {
            let nf = n as f64;
            let mean = nf * (nf + 1.0) / 4.0;
            let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
            normal_cdf((w as f64 + 0.5 - mean) / sd)
        }
    }
}

fn normal_cdf(z: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    Normal::new(0.0, 1.0).expect("standard normal").cdf(z)
}

/// The k-th smallest (1-based) Walsh average of sorted `d`, without building all n(n+1)/2 of
/// them (10,000 pairs would be 50 million): bisect on the value, counting pairs below it, then
/// take the smallest average above the last value with fewer than k.
fn walsh_kth(d: &[f64], k: usize) -> f64 {
    let count_le = |t: f64| -> usize {
        // Pairs i <= j with d_i + d_j <= 2t, two pointers over the sorted values.
        let (mut c, mut j) = (0usize, d.len());
        for i in 0..d.len() {
            while j > i && d[i] + d[j - 1] > 2.0 * t {
                j -= 1;
            }
            if j <= i {
                break;
            }
            c += j - i;
        }
        c
    };
    let (mut lo, mut hi) = (d[0], d[d.len() - 1]);
    if count_le(lo) >= k {
        return lo;
    }
    for _ in 0..200 {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if count_le(mid) >= k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // The answer is the smallest Walsh average above `lo`.
    let mut best = f64::INFINITY;
    for i in 0..d.len() {
        let j0 = i + d[i..].partition_point(|&x| d[i] + x <= 2.0 * lo);
        if j0 < d.len() {
            best = best.min((d[i] + d[j0]) / 2.0);
        }
    }
    best
}

/// The speed-up log-ratios of pairs (positive = the candidate is faster), in latency terms:
/// the deciding metric's log-ratio divided by its elasticity.
pub fn speedup_logs(pairs: &[(f64, f64)], direction: Direction, elasticity: f64) -> Vec<f64> {
    super::log_ratios(pairs, direction).into_iter().map(|x| x / elasticity).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_without_a_keep_carries_the_small_share_at_both_ends_and_reaches_no_gain() {
        use crate::stats::sequential::{run_pairs_to_decision, Borrowed, NoiseScale, Phase, Sequential};
        use crate::stats::Verdict;
        let params = crate::config::DecisionConfig::earlier().params(None);
        let ratio = Sequential::new(params.clone()).with_history(Some(Borrowed::new(NoiseScale { sd: 0.01, df: 15.0 })));
        // Pairs of +0.5% give or take 0.1%: under the 1% minimum effect, so the ratio does not keep,
        // yet every Walsh average is above no gain.
        let pairs = |mean: f64| move |_: Phase, i: usize| (mean + 0.001 * ((i * 7 % 5) as f64 - 2.0) / 2.0, Some(0.0));
        let logs = |d: &crate::stats::Decision, mean: f64| (0..d.pairs).map(|i| pairs(mean)(Phase::Main, i).0).collect::<Vec<_>>();
        let d = run_pairs_to_decision(&ratio, pairs(0.005));
        assert_ne!(d.verdict, Verdict::Keep, "{}", d.reason);
        // The row's interval reads the decision's verdict, rule and level; over 20 such pairs
        // (the ratio stopped sooner), so that each end has room to move.
        let l: Vec<f64> = (0..20).map(|i| pairs(0.005)(Phase::Main, i).0).collect();
        let (split, shown, both) =
            (decision_interval(&l, d.ci_level).unwrap(), shown_interval(&l, &d).unwrap(), stopped_interval(&l, d.ci_level).unwrap());
        assert!(split.low > 0.0 && shown.low == 0.0, "{split:?} {shown:?}");
        // The upper end misses with the lower end's share, not the rest: further out than the
        // split interval's.
        assert!(shown.high == both.high && both.high > split.high && shown.estimate == split.estimate, "{split:?} {shown:?}");
        // A keep of the ratio shows the split interval as it is.
        let keep = run_pairs_to_decision(&ratio, pairs(0.05));
        assert_eq!(keep.verdict, Verdict::Keep);
        assert_eq!(shown_interval(&logs(&keep, 0.05), &keep), decision_interval(&logs(&keep, 0.05), keep.ci_level));
        // The two phases' row without a keep: the same.
        let two = run_pairs_to_decision(&Sequential::new(params), pairs(0.005));
        assert_ne!(two.verdict, Verdict::Keep, "{}", two.reason);
        assert_eq!(shown_interval(&l, &two), Some(shown));
    }

    #[test]
    fn a_stopped_interval_misses_at_most_the_small_share_at_each_end() {
        // Each end's one-sided miss under the signed-rank law is at most an eighth of 1 - level:
        // the lower end's Walsh average k has P(W+ <= k - 1) <= 0.5%, and the same above.
        let mut rng = crate::stats::rng::Rng::new(11);
        for n in [8usize, 12, 20, 40] {
            // Distinct Walsh averages, so that each end names one k.
            let mut d: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
            d.sort_by(f64::total_cmp);
            let e = stopped_interval(&d, 0.96).unwrap();
            let tail = signed_rank_cdf(n);
            let total = n * (n + 1) / 2;
            let k_low = (1..=total).find(|&k| walsh_kth(&d, k) == e.low).unwrap();
            let k_high = (1..=total).find(|&k| walsh_kth(&d, total + 1 - k) == e.high).unwrap();
            assert!(tail(k_low - 1) <= 0.005 + 1e-12 && tail(k_high - 1) <= 0.005 + 1e-12, "n {n}: {e:?}");
            // And no further out than it needs: one step in would miss more than that share.
            assert!(tail(k_low) > 0.005 && tail(k_high) > 0.005, "n {n}: {e:?}");
            assert!(e.coverage >= 0.99 - 1e-12, "n {n}: {e:?}");
        }
    }

    fn walsh_sorted(d: &[f64]) -> Vec<f64> {
        let mut w = vec![];
        for i in 0..d.len() {
            for j in i..d.len() {
                w.push((d[i] + d[j]) / 2.0);
            }
        }
        w.sort_by(f64::total_cmp);
        w
    }

    #[test]
    fn kth_walsh_average_matches_enumeration() {
        let mut rng = crate::stats::rng::Rng::new(7);
        for n in [1, 2, 3, 5, 8, 13, 40] {
            let mut d: Vec<f64> = (0..n).map(|_| rng.normal() * 0.1 + if rng.uniform() < 0.2 { 1.0 } else { 0.0 }).collect();
            d.sort_by(f64::total_cmp);
            let w = walsh_sorted(&d);
            for k in 1..=w.len() {
                assert_eq!(walsh_kth(&d, k), w[k - 1], "n {n} k {k}");
            }
        }
        // Ties.
        let d = [0.0, 0.0, 0.0, 1.0];
        let w = walsh_sorted(&d);
        for k in 1..=w.len() {
            assert_eq!(walsh_kth(&d, k), w[k - 1]);
        }
    }

    #[test]
    fn signed_rank_distribution_is_exact() {
        // n = 3: W+ takes 0..=6 with counts 1,1,1,2,1,1,1 over 8 subsets.
        let cdf = signed_rank_cdf(3);
        let want = [1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0];
        for (w, c) in want.iter().enumerate() {
            assert!((cdf(w) - c / 8.0).abs() < 1e-15);
        }
        // The published critical value: n = 10, P(W+ <= 10) = 0.0420 (two-sided 0.084 <= 0.10).
        assert!((signed_rank_cdf(10)(10) - 43.0 / 1024.0).abs() < 1e-12);
        // Normal approximation agrees with the exact count where both are used.
        let (e, a) = (signed_rank_cdf(60)(700), { signed_rank_cdf(61)(700 + 30) });
        assert!((e - a).abs() < 0.02, "{e} {a}");
    }

    #[test]
    fn interval_is_the_matching_walsh_averages() {
        let d: Vec<f64> = (1..=10).map(|i| i as f64 / 100.0).collect();
        let e = hodges_lehmann(&d, 0.9).unwrap();
        let w = walsh_sorted(&d);
        // n = 10 at 90%: k = 11 (P(W+ <= 10) = 0.042), so Walsh averages 11 and 45.
        assert_eq!((e.low, e.high), (w[10], w[44]));
        assert!((e.coverage - (1.0 - 2.0 * 43.0 / 1024.0)).abs() < 1e-12);
        assert!((e.estimate - 0.055).abs() < 1e-12);
        // Too few pairs for 90%: the whole range, at the coverage it has (1 - 2/8).
        let e = hodges_lehmann(&[0.1, 0.2, 0.4], 0.9).unwrap();
        assert_eq!((e.low, e.high), (0.1, 0.4));
        assert!((e.coverage - 0.75).abs() < 1e-12);
    }

    #[test]
    fn a_few_wild_pairs_do_not_carry_it() {
        // A true 2x with 2% noise; two pairs whose incumbent ran 4x slow.
        let mut rng = crate::stats::rng::Rng::new(3);
        let mut d: Vec<f64> = (0..12).map(|_| 2f64.ln() + 0.02 * rng.normal()).collect();
        d[2] += 4f64.ln();
        d[7] += 4f64.ln();
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        let e = hodges_lehmann(&d, 0.9).unwrap();
        assert!(mean.exp() > 2.5, "the mean is carried: {}", mean.exp());
        assert!((e.estimate.exp() / 2.0 - 1.0).abs() < 0.15, "{}", e.estimate.exp());
    }

    #[test]
    fn a_decision_s_interval_gives_its_lower_end_an_eighth_of_the_miss() {
        let d: Vec<f64> = (1..=10).map(|i| i as f64 / 100.0).collect();
        let w = walsh_sorted(&d);
        // n = 10 at 96%: P(W+ <= k) over 1024 is 5 at k = 3 and 7 at 4 (0.5% allows 5.12), and
        // 33 at 9 and 43 at 10 (3.5% allows 35.84): Walsh averages 4 and 55 + 1 - 10 = 46.
        let e = decision_interval(&d, 0.96).unwrap();
        assert_eq!((e.low, e.high), (w[3], w[45]));
        assert!((e.coverage - (1.0 - 38.0 / 1024.0)).abs() < 1e-12, "{}", e.coverage);
        assert_eq!(e.estimate, hodges_lehmann(&d, 0.96).unwrap().estimate);
        // 6 pairs: the lower end cannot miss with under 1/64 > 0.5%, so it is the smallest
        // average and the upper end gets 4% - 1/64 < 2/64: the whole range, at 1 - 2/64.
        let e = decision_interval(&d[..6], 0.96).unwrap();
        assert_eq!((e.low, e.high), (0.01, 0.06));
        assert!((e.coverage - (1.0 - 2.0 / 64.0)).abs() < 1e-12);
        // An even split is the equal-tailed interval.
        assert_eq!(hodges_lehmann_tails(&d, 0.96, 0.5), hodges_lehmann(&d, 0.96));
        // Negated log-ratios give the mirror image of the opposite split.
        let neg: Vec<f64> = d.iter().map(|x| -x).collect();
        let m = decision_interval(&neg, 0.96).unwrap();
        let back = hodges_lehmann_tails(&d, 0.96, 1.0 - DECISION_LOWER_SHARE).unwrap();
        assert!((m.low + back.high).abs() < 1e-15 && (m.high + back.low).abs() < 1e-15);
    }

    #[test]
    fn each_end_misses_as_often_as_its_share_says() {
        // 12 pairs of symmetric noise around a true 3%: the lower end lies above the truth with
        // probability P(W+ <= k_low - 1) <= its share of the 4% miss, the upper end below it
        // with at most the rest.
        let tail = signed_rank_cdf(12);
        let mut rng = crate::stats::rng::Rng::new(17);
        let (trials, truth) = (40_000, 0.03);
        let (mut above, mut below) = (0usize, 0usize);
        for _ in 0..trials {
            let d: Vec<f64> = (0..12).map(|_| truth + 0.02 * rng.normal()).collect();
            let e = decision_interval(&d, 0.96).unwrap();
            above += (e.low > truth) as usize;
            below += (e.high < truth) as usize;
        }
        // Both ends' miss together, the same for every 12 pairs.
        let miss = 1.0 - decision_interval(&[0.0; 12], 0.96).unwrap().coverage;
        let (pa, pb) = (above as f64 / trials as f64, below as f64 / trials as f64);
        let low_share = DECISION_LOWER_SHARE * 0.04;
        let k_low = (1..).find(|&k| tail(k) > low_share).unwrap();
        let exact_low = tail(k_low - 1);
        assert!(exact_low <= low_share && (pa - exact_low).abs() < 4.0 * (exact_low / trials as f64).sqrt(), "{pa} vs {exact_low}");
        let exact_high = miss - exact_low;
        assert!(
            exact_high <= 0.04 - low_share && (pb - exact_high).abs() < 4.0 * (exact_high / trials as f64).sqrt(),
            "{pb} vs {exact_high}"
        );
    }
}
