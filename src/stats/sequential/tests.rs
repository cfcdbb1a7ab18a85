//! Unit tests of the procedure: the looks and their levels, the order, the no-history and
//! with-history tests, the guard, outliers, the confirmation and its re-read.

use super::borrowed::sum_spread_profiled;
use super::stat::{Batch, Prior};
use super::*;
use crate::stats::LookPhase;

fn params() -> Params {
    Params::for_tests(12)
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// Log-ratios of `gain` (a fraction) with a deterministic +-`wiggle` pattern.
fn ratios(gain: f64, wiggle: f64, n: usize) -> Vec<f64> {
    let w = [1.0, -0.5, 0.3, -0.8, 0.6, -0.2, 0.9, -0.4];
    (0..n).map(|i| (1.0 + gain).ln() + wiggle * w[i % w.len()]).collect()
}

#[test]
fn spending_functions_match_their_formulas() {
    // Pocock-type: 0.05 * ln(1 + (e - 1) * 0.5) = 0.05 * 0.6201145069582774 (math.log).
    assert!(close(Spending::Pocock.spent(0.05, 0.5), 0.05 * 0.6201145069582774, 1e-12));
    // O'Brien-Fleming-type at t = 0.5: 2 - 2 * scipy.stats.norm.cdf(norm.ppf(0.975) / sqrt(0.5))
    // = 0.005574596680784305.
    assert!(close(Spending::OBrienFleming.spent(0.05, 0.5), 0.005574596680784305, 1e-9));
    for s in [Spending::Pocock, Spending::OBrienFleming] {
        assert!(close(s.spent(0.05, 1.0), 0.05, 1e-9));
        assert_eq!(s.spent(0.05, 0.0), 0.0);
    }
}

#[test]
fn looks_and_their_alphas_sum_to_alpha() {
    let p = params();
    assert_eq!(p.looks(), vec![4, 6, 8, 10, 12]);
    let a = p.look_alphas();
    assert!(close(a.iter().sum::<f64>(), 0.05, 1e-12));
    assert!(a.iter().all(|&x| x > 0.0));
    let p = Params { max_pairs: 11, ..params() };
    assert_eq!(p.looks(), vec![4, 6, 8, 10, 11]);
    assert_eq!(Params::fixed(5, 0.05, 1.0).looks(), vec![5]);
}

#[test]
fn orders_come_in_twos_and_confirmation_is_the_complement() {
    let main: Vec<bool> = (0..8).map(|i| incumbent_first(Phase::Main, i)).collect();
    let conf: Vec<bool> = (0..8).map(|i| incumbent_first(Phase::Confirm, i)).collect();
    // BA, AB, AB, BA, ... then AB, BA, BA, AB, ...
    assert_eq!(main, [false, true, true, false, false, true, true, false]);
    assert_eq!(conf, [true, false, false, true, true, false, false, true]);
}

#[test]
fn asks_for_the_first_look_then_the_next() {
    let s = Sequential::new(params());
    assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: 4 });
    // A small noisy gain: neither clear nor futile at 4 pairs.
    let d = ratios(0.01, 0.01, 4);
    assert_eq!(s.next(&d, &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
}

#[test]
fn big_gain_stops_early_and_is_confirmed() {
    let s = Sequential::new(params());
    let d = ratios(0.10, 0.005, 4);
    assert_eq!(s.next(&d, &[]), Next::Measure { phase: Phase::Confirm, pairs: 6 });
    let Next::Done(dec) = s.next(&d, &ratios(0.10, 0.005, 6)) else { panic!("decided") };
    assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
    assert_eq!((dec.pairs, dec.looks), (4, 1));
    let c = dec.confirmation.unwrap();
    assert!(c.passed && c.pairs == 6 && c.p_value < 0.02);
    assert!(dec.ci_low_pct < dec.effect_pct && dec.effect_pct < dec.ci_high_pct);
    assert!(close(dec.effect_pct, 10.0, 0.5), "{}", dec.effect_pct);
}

#[test]
fn failed_confirmation_is_unconfirmed() {
    let s = Sequential::new(params());
    let d = ratios(0.10, 0.005, 4);
    let Next::Done(dec) = s.next(&d, &ratios(0.0, 0.005, 6)) else { panic!("decided") };
    assert_eq!(dec.verdict, Verdict::Unconfirmed);
    assert!(dec.reason.contains("unconfirmed") && dec.reason.contains("--pairs"), "{}", dec.reason);
    assert!(!dec.confirmation.unwrap().passed);
}

#[test]
fn no_gain_stops_for_futility() {
    let s = Sequential::new(params());
    let Next::Done(dec) = s.next(&ratios(-0.02, 0.003, 4), &[]) else { panic!("decided") };
    assert_eq!(dec.verdict, Verdict::Revert);
    assert!(dec.reason.contains("no worthwhile gain"), "{}", dec.reason);
    assert_eq!(dec.looks, 1);
}

#[test]
fn budget_running_out_is_inconclusive() {
    // A gain around the minimum effect with wide noise: never clear, never futile.
    let s = Sequential::new(params());
    let d = ratios(0.012, 0.03, 12);
    let dec = run_to_decision(&s, |_, i| d[i]);
    assert_eq!(dec.verdict, Verdict::Inconclusive, "{}", dec.reason);
    assert_eq!((dec.pairs, dec.looks), (12, 5));
}

#[test]
fn significant_but_small_gain_is_not_kept() {
    let s = Sequential::new(Params { futility_beta: None, confirm: false, ..params() });
    let d = ratios(0.004, 0.0005, 12);
    let dec = run_to_decision(&s, |_, i| d[i]);
    assert_ne!(dec.verdict, Verdict::Keep);
    assert!(dec.p_value < 1e-6);
}

#[test]
fn fixed_params_reproduce_the_fixed_t_test() {
    let pairs: Vec<(f64, f64)> = [1.05, 1.02, 1.04, 1.03, 1.06].iter().map(|r| (100.0, 100.0 * r)).collect();
    let d: Vec<f64> = crate::stats::log_ratios(&pairs, crate::stats::Direction::Higher);
    let seq = run_to_decision(&Sequential::new(Params::fixed(5, 0.05, 1.0)), |_, i| d[i]);
    // One look at 5 pairs with the whole alpha is the plain one-sided t-test.
    let (mean, _, p) = crate::stats::t_test_greater(&d);
    assert_eq!(seq.verdict, Verdict::Keep);
    assert_eq!((seq.looks, seq.procedure), (1, crate::stats::Procedure::Fixed));
    assert!(close(seq.p_value, p, 1e-15) && close(seq.effect_pct, pct(mean), 1e-12));
}
fn borrowed(sd: f64) -> Sequential {
    Sequential::new(Params { alpha: 0.02, confirm_pairs: 5, confirm_alpha: 0.05, futility_beta: Some(0.3), max_pairs: 16, ..params() })
        .with_history(Some(Borrowed::new(NoiseScale { sd, df: 15.0 })))
}

#[test]
fn history_decides_a_clear_gain_at_two_pairs_each() {
    let s = borrowed(0.014);
    assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
    let d = ratios(0.10, 0.005, 2);
    assert_eq!(s.next(&d, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
    let Next::Done(dec) = s.next(&d, &ratios(0.10, 0.005, 2)) else { panic!("decided") };
    assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
    assert_eq!((dec.pairs, dec.scale.as_str()), (2, "history"));
    // The history's sd times the safety factor, pooled with the pairs' own spread.
    assert!(dec.noise_sd_pct > 0.014 * 100.0 * 0.9 && dec.noise_sd_pct < 0.014 * 100.0 * SAFETY, "{}", dec.noise_sd_pct);
    assert!(dec.p_adjusted >= dec.p_value && dec.p_threshold < 0.02);
    let c = dec.confirmation.unwrap();
    assert!(c.ci_low_pct < c.effect_pct && c.effect_pct < c.ci_high_pct);
}

#[test]
fn after_a_history_showing_two_modes_the_first_phase_looks_first_at_six_pairs() {
    // Pairs all at +4% with a 0.4% history: a clean gain at 2 pairs, and on a machine whose
    // runs have a slow mode, the pattern of the incumbent's run in it again and again.
    let slow_mode = [0.040, 0.041, 0.039, 0.040, 0.041, 0.040];
    let mut s = borrowed(0.004);
    (s.params.levels.first_look_second_population, s.params.levels.first_look_two_modes) = (OUTLIER_FIRST_LOOK_BEFORE, OUTLIER_FIRST_LOOK);
    assert!(s.params.min_pairs < OUTLIER_FIRST_LOOK, "the wait outlasts the configured first look");
    s.borrowed.as_mut().unwrap().modes = Some(0);
    assert_eq!(s.next(&slow_mode[..2], &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 }, "one mode, no outlier");
    // A history with no session long enough to tell modes cannot rule a second population out,
    // and one that saw gross outliers alone has one the outlier rule sets aside: both wait the
    // shorter while, never past min_pairs.
    for (outliers, modes) in [(0, None), (1, Some(0)), (1, None)] {
        let b = s.borrowed.as_mut().unwrap();
        (b.outliers, b.modes) = (outliers, modes);
        assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: OUTLIER_FIRST_LOOK_BEFORE.min(s.params.min_pairs) });
    }
    // Two modes shown: the slow mode's streak is waited out.
    for (outliers, modes) in [(0, Some(1)), (1, Some(2))] {
        let b = s.borrowed.as_mut().unwrap();
        (b.outliers, b.modes) = (outliers, modes);
        assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: OUTLIER_FIRST_LOOK });
        assert_eq!(s.next(&slow_mode[..2], &[]), Next::Measure { phase: Phase::Main, pairs: 4 });
        assert_eq!(s.next(&slow_mode[..4], &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
        assert_eq!(s.next(&slow_mode, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 }, "the confirmation keeps its first look");
        assert_eq!(s.main_alphas(&s.main_params()).len(), s.main_params().looks().len());
    }
    // Without the longer wait: 4 pairs, never past min_pairs; without either, no wait at all.
    s.params.levels.first_look_two_modes = 0;
    assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: OUTLIER_FIRST_LOOK_BEFORE.min(s.params.min_pairs) });
    assert_eq!(s.next(&slow_mode[..4], &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
    s.params.levels.first_look_second_population = 0;
    assert_eq!(s.next(&[], &[]), Next::Measure { phase: Phase::Main, pairs: 2 }, "no wait");
}

#[test]
fn pairs_noisier_than_history_fall_back_to_their_own_t_test() {
    // History says 0.2%; the pairs scatter by 5%: the guard hands the look to the t-test.
    let s = borrowed(0.002);
    let d = [0.10, 0.02, 0.12, 0.01, 0.09, 0.03];
    let t = s.test(&d, 6, (0.0, 0.0)).unwrap();
    assert!(!t.borrowed);
    let quiet = [0.10, 0.101, 0.099, 0.1005, 0.0995, 0.1];
    assert!(s.test(&quiet, 6, (0.0, 0.0)).unwrap().borrowed);
}

#[test]
fn a_gross_outlier_is_set_aside_and_replaced() {
    let s = borrowed(0.014);
    // Pair 2 has a run 3x slower on the incumbent's side: a +110% log-ratio.
    let d = [0.10, 0.11, 1.2, 0.09];
    let t = s.test(&d, 4, (0.0, 0.0));
    assert!(t.is_none(), "one more pair is needed to replace it");
    let d = [0.10, 0.11, 1.2, 0.09, 0.1];
    let t = s.test(&d, 4, (0.0, 0.0)).unwrap();
    assert_eq!((t.n, t.measured, t.excluded), (4, 5, 1));
    assert!((t.mean - 0.1).abs() < 1e-12);
    // Without history nothing is set aside.
    assert_eq!(Sequential::new(params()).test(&d[..4], 4, (0.0, 0.0)).unwrap().excluded, 0);
}

/// History: one pair's log-ratio and log-sum both have sd 1% (15 df each).
fn with_sums(retest_guard: f64) -> Sequential {
    let scale = NoiseScale { sd: 0.01, df: 15.0 };
    let b = Borrowed { retest_guard, ..Borrowed::new(scale).with_sums(Some(scale)) };
    Sequential::new(Params { alpha: 0.02, confirm_pairs: 5, confirm_alpha: 0.05, futility_beta: Some(0.3), max_pairs: 16, ..params() })
        .with_history(Some(b))
}

#[test]
fn the_sums_see_a_noise_jump_that_two_log_ratios_miss() {
    let s = with_sums(RETEST_GUARD);
    // Two pairs at +5% whose log-ratios agree (1 df: the guard cannot fire on them), but whose
    // runs moved together by 6% between the pairs: their sums' spread is 18 x the history's
    // (0.06^2 / 2 over 0.01^2, 1 df).
    let main = [0.05, 0.0501];
    let (quiet, jumpy) = ([0.0, 0.0001], [0.0, 0.06]);
    // The log-ratios alone (or quiet sums): significant on the borrowed scale, on to the
    // confirmation after 2 pairs.
    assert_eq!(s.next(&main, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
    assert_eq!(s.next_runs(&main, &[], &quiet, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
    // With the sums the guard sees the jump ((0 + 18) / 2 df = 9 > F(2, 15) at 0.15, 2.2):
    // the look falls back to the pairs' own scale (3x the history's, 2 df) and waits.
    assert_eq!(s.next_runs(&main, &[], &jumpy, &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
    // A history written before the sums were recorded: the guard sees the log-ratios alone.
    let old = s.clone().with_history(s.borrowed.clone().map(|b| b.with_sums(None)));
    assert_eq!(old.next_runs(&main, &[], &jumpy, &[]), Next::Measure { phase: Phase::Confirm, pairs: 2 });
}

#[test]
fn a_fallback_is_never_looser_than_the_borrowed_look() {
    // Whatever fires the guard (log-ratios or sums), every rejection of the fallback look must
    // be one of the borrowed look too: its critical mean is at least the borrowed one's.
    let s = with_sums(RETEST_GUARD);
    let mut rng = crate::stats::rng::Rng::new(3);
    let mut fired = 0;
    for _ in 0..400 {
        let n = 2 + (rng.uniform() * 8.0) as usize;
        let (jd, js) = (0.5 + 3.0 * rng.uniform(), 0.5 + 3.0 * rng.uniform());
        let d: Vec<f64> = (0..n).map(|_| 0.01 * jd * rng.normal()).collect();
        let sums: Vec<f64> = (0..n).map(|_| 0.01 * js * rng.normal()).collect();
        let prior = Prior { ss: 0.0004 * rng.uniform(), df: 1.0, sum_q: 3.0 * rng.uniform(), sum_df: 1.0 };
        for guard in [GUARD, CONFIRM_GUARD] {
            // (None: two pairs far apart, one of them an outlier a third pair must tell.)
            let Some(t) = s.test_at(Batch { d: &d, s: &sums }, n, prior, guard) else { continue };
            let b = s.test_at(Batch { d: &d, s: &sums }, n, prior, 1e-300).unwrap();
            assert!(b.borrowed);
            if t.borrowed {
                continue;
            }
            fired += 1;
            for a in [0.05, 0.01, 0.002] {
                assert!(s.tq(1.0 - a, t.df) * t.se >= s.tq(1.0 - a, b.df) * b.se * (1.0 - 1e-12), "{t:?} {b:?}");
            }
        }
    }
    assert!(fired > 100, "the guard fired {fired} times");
}

#[test]
fn a_confirmation_that_finds_the_noise_jumped_re_reads_the_first_phase() {
    let main = [0.05, 0.0501];
    let quiet = [0.0, 0.0001];
    // The confirmation: a huge gain, but its sums scatter as if the noise were 7x the
    // history's (ratio (0.2^2 / 2 / 0.01^2) / 4 df = 50 > F(4, 15) at 0.05). Its own scale,
    // from its own pairs (1 + 1 df): sd 0.1, so t = 3 / (0.1 / sqrt 2) = 42 > q(0.9993, 2 df)
    // = 27.0.
    let (conf, conf_s) = ([3.0, 3.0], [0.0, 0.2]);
    // Without the re-read the confirmation passes on its own scale: kept on 2 + 2 pairs.
    let Next::Done(dec) = with_sums(0.0).next_runs(&main, &conf, &quiet, &conf_s) else { panic!("decided") };
    assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
    // With it, the first phase's +5% at 2 pairs (its first look, at a fifth of the increment,
    // 0.00078) does not hold on that scale (q(0.99922, 2 df) x 0.1 / sqrt 2 = 1.8): the
    // confirmation measures on.
    assert_eq!(with_sums(RETEST_GUARD).next_runs(&main, &conf, &quiet, &conf_s), Next::Measure { phase: Phase::Confirm, pairs: 2 });
}

#[test]
fn under_a_noise_jump_ordinary_pairs_are_not_set_aside_as_outliers() {
    // History sd 1%: the old band was 6%. Eight pairs of a noise 4x that (sd 4%), one of them
    // 1.8 sd out: an ordinary pair of this batch, but 6.7% from the median (0.005).
    let s = with_sums(RETEST_GUARD);
    let d = [0.01, -0.03, 0.04, -0.02, 0.072, -0.045, 0.0, 0.03];
    assert_eq!(s.kept_idx(&d).len(), 8, "the band follows the batch's own robust sd when larger");
    // A gross outlier (a run 3x slower: ln 3 = 1.1) still is one, at the history's noise...
    let quiet = [0.01, -0.012, 0.004, 1.1, -0.008, 0.0];
    assert_eq!(s.kept_idx(&quiet), vec![0, 1, 2, 4, 5]);
    // ...and at the jumped one.
    let mut noisy = d.to_vec();
    noisy[3] = -1.1;
    assert_eq!(s.kept_idx(&noisy), vec![0, 1, 2, 4, 5, 6, 7]);
}

#[test]
fn the_confirmation_s_own_test_does_not_borrow_the_first_phase_s_spread() {
    // The first phase stopped on two quiet pairs; the confirmation is 4x noisier than history.
    // Its own test's sd comes from its own pairs (log-ratios and sums) alone, not pooled down
    // with the first phase's small spread.
    let s = with_sums(RETEST_GUARD);
    let prior = s.prior_of(&[0.05, 0.0501], &[0.0, 0.0001]);
    let d = [0.02, 0.09, -0.01, 0.06];
    let sums = [0.0, 0.05, -0.03, 0.04];
    let t = s.test_at(Batch { d: &d, s: &sums }, 4, prior, CONFIRM_GUARD).expect("a look");
    assert!(!t.borrowed, "the guard fires");
    let (_, sd) = mean_sd(&d);
    let (sss, sdf) = sum_spread(&sums);
    let own = ((sd * sd * 3.0 + sss) / (3.0 + sdf)).sqrt();
    assert!((t.se * 2.0 - own).abs() < 1e-12, "{} vs {own}", t.se * 2.0);
    assert_eq!(t.df, 6.0);
    // The first phase's own looks keep their pooled spread (nothing before them to select).
    let m = s.test_at(Batch { d: &d, s: &sums }, 4, Prior::default(), GUARD).expect("a look");
    assert!((m.se - t.se).abs() < 1e-12 && m.df == 6.0);
}

#[test]
fn the_first_look_spends_a_fifth_of_its_increment_and_the_second_the_rest() {
    let s = with_sums(RETEST_GUARD);
    let p = s.main_params();
    let (plain, shared) = (p.look_alphas(), s.main_alphas(&p));
    assert!((shared[0] - FIRST_SHARE * plain[0]).abs() < 1e-15);
    assert!((shared[0] + shared[1] - plain[0] - plain[1]).abs() < 1e-15);
    assert_eq!(shared[2..], plain[2..]);
    // Without history the spending function is used as it is.
    let own = Sequential::new(s.params.clone());
    assert_eq!(own.main_alphas(&own.main_params()), own.params.look_alphas());
}

#[test]
fn log_sums_are_the_runs_sum_in_speed_up_terms() {
    use crate::stats::Direction;
    let pairs = [(100.0, 110.0), (50.0, 40.0)];
    let lower = log_sums(&pairs, Direction::Lower, 1.0);
    assert!((lower[0] - (100f64.ln() + 110f64.ln())).abs() < 1e-12);
    // A higher-is-better metric with elasticity 2 (score ~ 1 / latency^2): the same spread.
    let higher = log_sums(&pairs, Direction::Higher, 2.0);
    assert!((higher[1] + (50f64.ln() + 40f64.ln()) / 2.0).abs() < 1e-12);
    assert_eq!(sum_spread(&[1.0, 3.0, 2.0]), ((4.0 + 1.0) / 2.0, 2.0));
}

/// The unit tests' rule with the rescue on: `total` pairs in all at `level`.
fn rescuing(total: usize, level: f64) -> Sequential {
    Sequential::new(Params { rescue_pairs: total, rescue_alpha: level, ..params() })
}

#[test]
fn an_unconfirmed_decision_measures_on_and_the_t_test_over_all_pairs_keeps_it() {
    let s = rescuing(24, 0.001);
    // The first phase sees +10%, the confirmation's 6 pairs nothing: unconfirmed by the two
    // phases, which ask for no more.
    let main = ratios(0.10, 0.005, 4);
    let confirm = ratios(0.0, 0.005, 6);
    // 4 + 6 measured: the rescue asks for the rest of its 24, in the confirmation's order.
    assert_eq!(s.next(&main, &confirm), Next::Measure { phase: Phase::Confirm, pairs: 14 });
    let mut more = confirm.clone();
    more.extend(ratios(0.05, 0.005, 14));
    let Next::Done(dec) = s.next(&main, &more) else { panic!("decided after the rescue's pairs") };
    assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
    let r = dec.rescue.as_ref().expect("the rescue's record");
    assert_eq!((r.pairs, r.passed, r.before), (24, true, Verdict::Unconfirmed));
    // The row's figures are the rescue's: the mean of all 24 pairs, its p at the rescue's level.
    let all: Vec<f64> = main.iter().chain(&more).copied().collect();
    let mean = all.iter().sum::<f64>() / 24.0;
    assert!(close(dec.effect_pct, pct(mean), 1e-9), "{} against {}", dec.effect_pct, pct(mean));
    assert!(close(dec.p_threshold, 0.001, 1e-15) && dec.p_value <= 0.001);
    assert!(dec.ci_low_pct < dec.effect_pct && dec.effect_pct < dec.ci_high_pct);
    assert!(dec.reason.starts_with("kept by the rescue") && dec.reason.contains("unconfirmed"), "{}", dec.reason);
    assert_eq!(dec.procedure, crate::stats::Procedure::Rescue);
    // The confirmation's own record is the one the two phases made: its 6 pairs, not passed.
    let c = dec.confirmation.as_ref().expect("the confirmation");
    assert_eq!((c.pairs, c.passed), (6, false));
    assert_eq!(dec.trail.last().map(|l| l.phase), Some(LookPhase::Rescue));
}

#[test]
fn an_inconclusive_decision_that_shows_nothing_stays_inconclusive_with_every_pair_s_estimate() {
    let s = rescuing(20, 0.001);
    let d: Vec<f64> = ratios(0.012, 0.03, 12).into_iter().chain(ratios(0.0, 0.03, 8)).collect();
    let mut next = d.iter();
    let dec = run_to_decision(&s, |_, _| *next.next().expect("20 pairs"));
    assert_eq!(dec.verdict, Verdict::Inconclusive, "{}", dec.reason);
    let r = dec.rescue.as_ref().expect("the rescue ran");
    assert_eq!((r.pairs, r.passed, r.before), (20, false, Verdict::Inconclusive));
    assert!(close(dec.effect_pct, pct(d.iter().sum::<f64>() / 20.0), 1e-9));
    assert!(dec.reason.contains("the rescue does not keep it either"), "{}", dec.reason);
    // The first phase's own figures stay where the row's p and level came from.
    assert_eq!((dec.pairs, dec.looks), (12, 5));
}

#[test]
fn the_rescue_leaves_keeps_and_futility_reverts_as_they_were() {
    let (with, without) = (rescuing(30, 0.01), Sequential::new(params()));
    let mut rng = crate::stats::rng::Rng::new(11);
    for trial in 0..400 {
        let gain = [0.0, 0.01, 0.03, 0.10][trial % 4];
        let pairs: Vec<f64> = (0..40).map(|_| gain + 0.02 * rng.normal()).collect();
        let (a, b) = (run_to_decision(&with, |_, i| pairs[i]), run_to_decision(&without, |_, i| pairs[i]));
        match b.verdict {
            Verdict::Keep | Verdict::Revert => assert_eq!(a, b, "trial {trial}"),
            Verdict::Unconfirmed | Verdict::Inconclusive => {
                let r = a.rescue.as_ref().expect("the rescue ran");
                assert_eq!((r.pairs, r.before), (30, b.verdict));
                assert_eq!(a.verdict == Verdict::Keep, r.passed);
                // The procedure is the rescue's only where its test kept; else the phases' verdict stands.
                let by = if r.passed { crate::stats::Procedure::Rescue } else { crate::stats::Procedure::TwoPhases };
                assert_eq!(a.procedure, by, "trial {trial}");
            }
        }
    }
}

#[test]
fn the_rescue_reads_a_fixed_number_of_pairs_however_long_the_phases_were() {
    // 24 asked, but the phases may measure 16 + 6: the rescue reads 24 whatever they did.
    assert_eq!(rescuing(24, 0.001).rescue_total(), 24);
    // A budget above the rescue's: it reads the most the phases can measure (12 + 6); below
    // it, at most twice that (a small budget stays small).
    assert_eq!(rescuing(10, 0.001).rescue_total(), 18);
    assert_eq!(rescuing(10, 0.001).max_measured_pairs(), 18);
    assert_eq!(rescuing(100, 0.001).rescue_total(), 36);
    assert_eq!(rescuing(100, 0.001).params.max_total_pairs(), 36);
    // Off without a level, a pair count or a confirmation.
    assert_eq!(rescuing(30, 0.0).rescue_total(), 0);
    assert_eq!(rescuing(0, 0.001).rescue_total(), 0);
    let s = Sequential::new(Params { confirm: false, rescue_pairs: 30, rescue_alpha: 0.001, ..params() });
    assert_eq!((s.rescue_total(), s.max_measured_pairs()), (0, 12));
    // With a borrowed scale the phases may measure more (outliers replaced, one more
    // confirmation pair): the rescue still reads its 18, the first measured.
    let b = Sequential::new(Params { rescue_pairs: 12, rescue_alpha: 0.001, ..params() })
        .with_history(Some(Borrowed::new(NoiseScale { sd: 0.01, df: 15.0 })));
    assert_eq!((b.rescue_total(), b.max_measured_pairs()), (18, 23));
}

#[test]
fn the_rescue_s_false_keeps_stay_under_its_level_also_when_the_noise_jumps() {
    // The two phases at levels that keep nothing and stop for no futility, and no minimum
    // effect, so that every keep is the rescue's and its level alone binds: at 0.05 over 4000
    // do-nothing changes, once on a steady machine, once with the noise tripling after the
    // first 8 pairs (the t-test reads the pairs' own spread: no scale to be wrong about).
    let rule = Params { alpha: 1e-6, confirm_alpha: 1e-6, futility_beta: None, min_effect_pct: 0.0, ..params() };
    let s = Sequential::new(Params { rescue_pairs: 24, rescue_alpha: 0.05, ..rule });
    for jump in [1.0, 3.0] {
        let mut rng = crate::stats::rng::Rng::new(7);
        let trials = 4000;
        let mut keeps = 0;
        for _ in 0..trials {
            let pairs: Vec<f64> = (0..24).map(|i| 0.01 * rng.normal() * if i >= 8 { jump } else { 1.0 }).collect();
            // In the order measured, whichever phase.
            let mut next = pairs.iter();
            keeps += (run_to_decision(&s, |_, _| *next.next().expect("24 pairs at most")).verdict == Verdict::Keep) as usize;
        }
        // The binomial's 99.9% upper bound at the level: 0.05 + 3.1 x sqrt(0.05 x 0.95 / 4000).
        let rate = keeps as f64 / trials as f64;
        assert!(rate <= 0.05 + 3.1 * (0.05f64 * 0.95 / trials as f64).sqrt(), "jump {jump}: {rate}");
        assert!(rate > 0.02, "jump {jump}: the rescue does keep at its level ({rate})");
    }
}

/// [`with_sums`]'s procedure with a history that has seen `sessions` sessions start with a warm-up
/// step of `step` in the log-sums.
fn warming(step: f64, sessions: f64) -> Sequential {
    let mut s = with_sums(RETEST_GUARD);
    s.borrowed.as_mut().expect("history").warmup = Some(Warmup { steps: vec![step], sessions, sd: std::f64::consts::SQRT_2 * 0.01 });
    s
}

#[test]
fn a_warm_up_the_history_has_seen_is_not_read_as_noise_but_a_jump_still_is() {
    // Two pairs at +5%, the runs of the second 8% faster together than the first's (a machine
    // warming up): the sums' step alone is 32 x the history's variance.
    let (d, sums) = ([0.05, 0.0501], [0.10, 0.02]);
    let look = |s: &Sequential| s.test_at(Batch { d: &d, s: &sums }, 2, Prior::default(), GUARD).expect("a look");
    assert!(!look(&with_sums(RETEST_GUARD)).borrowed, "without a profile the guard fires");
    // A history whose sessions all began with about that step: read around it, the step is
    // noise-sized, and the borrowed scale stands.
    assert!(look(&warming(-0.078, 10.0)).borrowed, "the step the history has seen");
    // A history whose warm-up is within its noise (under WARMUP_Z standard errors) lends none.
    assert!(!look(&warming(-0.01, 1.0)).borrowed);
    // The same machine 6x noisier: the step is read around the profile, and the pairs' own
    // spread still shows the jump.
    let (jd, js) = ([0.05, 0.01], [0.10 + 0.09, 0.02]);
    let t = warming(-0.078, 10.0).test_at(Batch { d: &jd, s: &js }, 2, Prior::default(), GUARD).expect("a look");
    assert!(!t.borrowed, "a jump on top of the warm-up");
    // The confirmation does not start cold: its sums are read as they are.
    let prior = warming(-0.078, 10.0).prior_of(&[0.05, 0.0501], &[0.0, 0.0001]);
    let c = warming(-0.078, 10.0).test_at(Batch { d: &d, s: &sums }, 2, prior, CONFIRM_GUARD).expect("a look");
    assert!(!c.borrowed);
}

#[test]
fn the_sums_read_around_a_warm_up_count_its_uncertainty() {
    // One difference minus the step, over 1 + 1/sessions times a difference's variance; the
    // others as they are.
    let s = [0.10, 0.02, 0.03, 0.01];
    let (ss, df) = sum_spread_profiled(&s, &[-0.07], 4.0);
    let want = (-0.08f64 + 0.07).powi(2) / (2.0 * 1.25) + (0.01f64.powi(2) + 0.02f64.powi(2)) / 2.0;
    assert!((ss - want).abs() < 1e-15 && df == 3.0, "{ss} {want}");
    // No step (or none kept): the plain successive-difference spread.
    assert_eq!(sum_spread_profiled(&s, &[0.0], 4.0), sum_spread(&s));
    assert_eq!(sum_spread_profiled(&s, &[], 4.0), sum_spread(&s));
    // A step is kept only beyond WARMUP_Z standard errors of its mean (sd / sqrt(sessions)).
    let w = Warmup { steps: vec![-0.03, 0.01], sessions: 4.0, sd: 0.02 };
    assert_eq!(w.used(2, WARMUP_Z), vec![-0.03, 0.0]);
    assert_eq!(w.used(0, WARMUP_Z), Vec::<f64>::new());
}

#[test]
fn a_quarter_of_slow_pairs_does_not_revert_a_gain_for_futility() {
    // Eight pairs of a +3% gain on a 3% history, the last two each holding one 15% slower run of
    // the candidate: the mean is -1.3%, but the middle half is +3%.
    let mut main = ratios(0.03, 0.002, 6);
    main.extend([-0.13, -0.15]);
    let rule = |levels: Levels| {
        let s = borrowed(0.03);
        Sequential { params: Params { levels, ..s.params.clone() }, ..s }
    };
    assert_eq!(rule(Levels::current()).next(&main, &[]), Next::Measure { phase: Phase::Main, pairs: 2 });
    // Read without one pair at each end, it was reverted.
    let Next::Done(d) = rule(Levels::before_robust_rescue()).next(&main, &[]) else { panic!("decided") };
    assert_eq!((d.verdict, d.pairs), (Verdict::Revert, 8), "{}", d.reason);
    assert!(d.reason.contains("no worthwhile gain"), "{}", d.reason);
    // A change that is no gain all through is still reverted there.
    let none: Vec<f64> = ratios(-0.01, 0.002, 6).into_iter().chain([-0.13, 0.12]).collect();
    let Next::Done(d) = rule(Levels::current()).next(&none, &[]) else { panic!("decided") };
    assert_eq!(d.verdict, Verdict::Revert, "{}", d.reason);
}
