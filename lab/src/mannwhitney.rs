//! The two-sided Mann-Whitney U test (Wilcoxon rank-sum), as benchstat uses it to compare two
//! blocks of samples. ratchet does not decide with it; `ratchet-lab simulate` runs it as the
//! baseline the sequential procedure has to beat.

use statrs::distribution::{ContinuousCDF, Normal};

/// U of the first sample and the two-sided p-value. Exact (the permutation distribution of U)
/// when there are no ties and both samples have at most 50 values; otherwise the normal
/// approximation with the tie correction and a continuity correction (as
/// `scipy.stats.mannwhitneyu(..., method="asymptotic")`).
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> (f64, f64) {
    let (n1, n2) = (x.len(), y.len());
    assert!(n1 > 0 && n2 > 0, "the U test needs two non-empty samples");
    let mut all: Vec<(f64, usize)> = x.iter().map(|&v| (v, 0)).chain(y.iter().map(|&v| (v, 1))).collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Average ranks over ties; the tie sizes feed the variance correction.
    let mut r1 = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        r1 += all[i..=j].iter().filter(|e| e.1 == 0).count() as f64 * rank;
        i = j + 1;
    }
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let (f1, f2) = (n1 as f64, n2 as f64);
    let big = u1.max(f1 * f2 - u1);
    if tie_term == 0.0 && n1 <= 50 && n2 <= 50 {
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        let tail: f64 = counts[big.round() as usize..].iter().sum();
        return (u1, (2.0 * tail / total).min(1.0));
    }
    let n = f1 + f2;
    let mu = f1 * f2 / 2.0;
    let sigma = (f1 * f2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
    if sigma == 0.0 {
        return (u1, 1.0);
    }
    let z = (big - mu - 0.5) / sigma;
    let norm = Normal::new(0.0, 1.0).expect("standard normal");
    (u1, (2.0 * (1.0 - norm.cdf(z))).min(1.0))
}

/// How many orderings of `n1` and `n2` distinct values give each U = 0..=n1*n2, by the
/// recurrence c(m, n, u) = c(m - 1, n, u - n) + c(m, n - 1, u) (Mann & Whitney 1947).
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    let max_u = n1 * n2;
    // table[m][n] is the distribution for sizes (m, n), built up in m then n.
    let mut prev: Vec<Vec<f64>> = (0..=n2).map(|_| vec![1.0]).collect(); // m = 0: U = 0 only
    for m in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![1.0]]; // n = 0: U = 0 only
        for n in 1..=n2 {
            let mut c = vec![0.0; m * n + 1];
            // The largest value belongs to sample 1 (beats all n of sample 2) or to sample 2.
            for (u, &v) in prev[n].iter().enumerate() {
                c[u + n] += v;
            }
            for (u, &v) in cur[n - 1].iter().enumerate() {
                c[u] += v;
            }
            cur.push(c);
        }
        prev = cur;
    }
    let mut out = prev.swap_remove(n2);
    out.resize(max_u + 1, 0.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn exact_p_values_match_scipy() {
        // scipy.stats.mannwhitneyu(x, y, alternative='two-sided', method='exact')
        // -> statistic 24.0, pvalue 0.0524259022711035.
        let x = [1.1, 2.2, 3.1, 4.5, 5.0, 6.2, 7.7, 8.1, 9.9, 10.5];
        let y = [3.3, 5.5, 6.6, 7.2, 8.8, 9.1, 11.2, 12.5, 13.0, 14.4];
        let (u, p) = mann_whitney_u(&x, &y);
        assert_eq!(u, 24.0);
        assert!(close(p, 0.0524259022711035, 1e-12), "{p}");
        // mannwhitneyu([1,2,3], [4,5,6,7], method='exact') -> 0.0, 0.05714285714285714 (= 2/35).
        let (u, p) = mann_whitney_u(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0, 7.0]);
        assert_eq!(u, 0.0);
        assert!(close(p, 0.05714285714285714, 1e-12));
        // mannwhitneyu(range(10), range(10, 20), method='exact') -> 0.0, 1.082508822446903e-05.
        let a: Vec<f64> = (0..10).map(f64::from).collect();
        let b: Vec<f64> = (10..20).map(f64::from).collect();
        assert!(close(mann_whitney_u(&a, &b).1, 1.082508822446903e-05, 1e-15));
    }

    #[test]
    fn ties_use_the_corrected_normal_approximation() {
        // mannwhitneyu([1,2,2,3,5], [2,4,5,6,7,7], method='asymptotic') -> 4.5, 0.06414661873440437.
        let (u, p) = mann_whitney_u(&[1.0, 2.0, 2.0, 3.0, 5.0], &[2.0, 4.0, 5.0, 6.0, 7.0, 7.0]);
        assert_eq!(u, 4.5);
        assert!(close(p, 0.06414661873440437, 1e-10), "{p}");
    }

    #[test]
    fn u_distribution_counts_all_orderings() {
        // C(7, 3) = 35 orderings of 3 + 4 values.
        let c = u_counts(3, 4);
        assert_eq!(c.len(), 13);
        assert_eq!(c.iter().sum::<f64>(), 35.0);
        assert_eq!(c[0], 1.0);
        assert_eq!(c[12], 1.0);
    }
}
