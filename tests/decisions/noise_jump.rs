//! The noise jumping above its history: the confirmation's looser variance guard sees
//! a confirmation batch noisier than history that the old guard (F level 0.05 on 2 df) let pass
//! on the borrowed scale, and `ratchet simulate` tables the jump models with Wilson intervals.

use crate::support;

use predicates::prelude::*;
use ratchet::stats::sequential::{
    Borrowed, Next, NoiseScale, OnePhase, Params, Phase, Sequential, Spending, CONFIRM_BETA, CONFIRM_GUARD, GUARD,
};
use ratchet::stats::Verdict;
use support::TestRepo;

fn params() -> Params {
    Params {
        min_pairs: 4,
        max_pairs: 16,
        look_every: 2,
        alpha: 0.02,
        spending: Spending::Pocock,
        min_effect_pct: 1.0,
        futility_beta: Some(0.3),
        confirm: true,
        confirm_pairs: 5,
        confirm_alpha: 0.05,
        // The two phases alone: what these pairs show is theirs.
        rescue_pairs: 0,
        rescue_alpha: 0.0,
        likelihood_ratio: OnePhase::Never,
        likelihood_ratio_wide: false,
        likelihood_ratio_scaled: false,
        likelihood_ratio_one_mode: false,
        likelihood_ratio_streak: false,
        outlier_first_look: false,
        likelihood_ratio_told: false,
        outlier_first_look_later: false,
        likelihood_ratio_streak_shown: false,
    }
}

/// History: one pair's log-ratio has sd 1% (15 df).
fn borrowed() -> Borrowed {
    Borrowed::new(NoiseScale { sd: 0.01, df: 15.0 })
}

#[test]
fn a_confirmation_noisier_than_history_no_longer_passes_on_the_borrowed_scale() {
    const { assert!(CONFIRM_GUARD >= GUARD, "the confirmation's guard is never the stricter one") };
    // Phase 1: two quiet pairs at +5%: significant on the borrowed scale at the first look.
    let main = [0.05, 0.0501];
    // The confirmation's two pairs: +4% on average, but their variance (with phase 1's residual:
    // (2 x 0.0158^2 + 5e-9) / 2 = 2.5 x the history's) is above history. F(2, 15) at 0.05 is
    // 3.68 (scipy.stats.f.ppf(0.95, 2, 15)): the old guard misses it; at 0.15 it is 2.16.
    let d = 0.0158;
    let confirm = [0.04 - d, 0.04 + d];

    // Before (guards 0.05, futility beta 0.2 in the confirmation, safety 1.2, 5 confirmation
    // pairs, no re-read): borrowed scale, mean 0.04 over a critical 3.34 x 1.2 x 0.0108 / sqrt 2
    // = 0.031: kept on 2 + 2 pairs.
    let old =
        Borrowed { guard: 0.05, confirm_guard: 0.05, confirm_beta: 0.2, safety: 1.2, retest_guard: 0.0, confirm_extra: 0, ..borrowed() };
    let before = Sequential::new(params()).with_history(Some(old));
    let Next::Done(dec) = before.next(&main, &confirm) else { panic!("the old procedure decides at once") };
    assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);

    // Now the guard fires: the look uses the confirmation's own t-test, from its own pairs (1 df:
    // t = 2.5 against 463), which does not pass; not futile either, so the confirmation measures
    // its next look.
    let now = Sequential::new(params()).with_history(Some(borrowed()));
    assert_eq!(now.next(&main, &confirm), Next::Measure { phase: Phase::Confirm, pairs: 2 });
    // The next pairs show nothing: unconfirmed, not kept.
    let more = [0.04 - d, 0.04 + d, -0.004, 0.006, 0.001, -0.002];
    let Next::Done(dec) = now.next(&main, &more) else { panic!("decided after the last look") };
    assert_eq!(dec.verdict, Verdict::Unconfirmed, "{}", dec.reason);
    let c = dec.confirmation.expect("a confirmation batch ran");
    assert!(!c.passed && c.pairs <= 6, "{c:?}");
}

#[test]
fn a_confirmation_as_quiet_as_history_still_passes_at_two_pairs() {
    // The guard costs nothing when the noise is what history says: same phase 1, a confirmation
    // at +4% whose spread is under the history's (variance ratio 0.25, under F 0.15's 2.16).
    let now = Sequential::new(params()).with_history(Some(borrowed()));
    assert_eq!((borrowed().confirm_guard, borrowed().confirm_beta), (CONFIRM_GUARD, CONFIRM_BETA));
    let Next::Done(dec) = now.next(&[0.05, 0.0501], &[0.035, 0.045]) else { panic!("decided") };
    assert_eq!(dec.verdict, Verdict::Keep, "{}", dec.reason);
    assert_eq!((dec.scale.as_str(), dec.confirmation.unwrap().pairs), ("history", 2));
}

#[test]
fn simulate_tables_the_jump_models_with_clopper_pearson_intervals() {
    let t = TestRepo::new();
    let out = t.ratchet().args(["simulate", "--defaults", "--trials", "20", "--null-trials", "40"]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    for name in ["cv 1%, 1.5x history", "cv 1%, 2x history", "cv 1%, 3x history", "cv 1% rising to 3x history"] {
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with(&format!("| {name} |"))).collect();
        assert_eq!(rows.len(), 3, "{name}: +0%, +3%, +10%\n{text}");
        // The null row: 40 trials and a 95% Clopper-Pearson interval (its upper end is above 0
        // even with no keep: 1 - 0.025^(1/40) = 8.81%).
        assert!(rows[0].contains("| +0% | 40 |"), "{}", rows[0]);
        if rows[0].contains("| 0.000% |") {
            assert!(rows[0].contains("[0.00, 8.81]"), "{}", rows[0]);
        }
    }
    // The floor no test of the same levels beats on average, under the with-history table.
    assert!(text.contains("2.7 runs under no gain, 5.8 at +3%, 2.0 at +10%"), "{text}");
    // And what that SPRT takes on whole pairs, its overshoot included (above the formula's).
    assert!(
        text.contains("its overshoot included): 4.4 runs under no gain (keeps 0.028%), 7.8 at +3% (keeps 98.5%), 2.0 at +10%"),
        "{text}"
    );
    // The floor for tests that must also hold the bound when the noise jumps (up to 10x): for a
    // test that reads whole pairs (as ratchet's guard reads the log-sums), and for one of the
    // log-ratios alone, with what a test of those built to hold it by construction spends.
    assert!(text.contains("1.78x the calibrated noise looks most like +3%): 2.7 runs under no gain, 11.0 at +3%, 4.0 at +10%"), "{text}");
    assert!(text.contains("log-ratios alone (the least favourable noise 2.32x): 15.1 runs at +3%, 6.6 at +10%"), "{text}");
    // And over every machine of independent runs the simulator has, of any shape: the one with
    // half its runs 3% slower sets the +3% floor, the jumped normal one still the +10% floor.
    assert!(
        text.contains("machines of independent runs (normal and t(3) noise at 1x-10x the calibration, spikes, slow modes, outliers at their own; a test that reads whole pairs): 12.2 runs at +3% (set by cv 1% bimodal 50/50), 4.0 at +10% (set by normal, 1x-10x the calibrated noise)"),
        "{text}"
    );
    assert!(text.contains("a test of the log-ratios that holds that by construction (floor::ScaleFree"), "{text}");
    // --only keeps the models named.
    let out = t.ratchet().args(["simulate", "--defaults", "--trials", "4", "--null-trials", "4", "--only", "warm-up"]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| cv")).collect();
    // The warming machine, and the same 4x and 6x noisier: three gains each.
    assert_eq!(rows.len(), 9, "{text}");
    assert!(rows.iter().all(|r| r.starts_with("| cv 1% + 10% warm-up ramp")), "{text}");
    t.ratchet().args(["simulate", "--defaults", "--trials", "2", "--null-trials", "2"]).assert().success().stdout(
        predicate::str::contains(format!(
            "variance guard on the log-ratios and the runs' sums at F level {GUARD} ({CONFIRM_GUARD} in the confirmation"
        )),
    );
}

#[test]
fn simulate_help_lists_every_noise_model() {
    let t = TestRepo::new();
    let out = t.ratchet().args(["simulate", "--help"]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let models = ratchet::stats::simulate::scenarios();
    for s in &models {
        assert!(text.lines().any(|l| l.trim() == s.name), "{} is not in --help:\n{text}", s.name);
    }
    // The models the power work asks for, by what each one is.
    let has = |f: &dyn Fn(&ratchet::stats::simulate::Scenario) -> bool| models.iter().any(f);
    assert!(has(&|s| s.ramp >= 0.10 && s.drift_per_run == 0.0), "a warm-up ramp");
    assert!(has(&|s| s.slow_mode_prob == 0.1 && s.slow_mode == 0.05), "bimodal runs");
    assert!(has(&|s| s.rho == 0.5) && has(&|s| s.rho == 0.8), "AR(1) 0.5 and 0.8");
    assert!(has(&|s| s.tail_df == Some(3.0) && s.jump == 1.0), "t(3) tails");
    for j in [1.5, 10.0] {
        assert!(has(&|s| s.jump == j && s.tail_df.is_none() && !s.jump_at_confirm), "a {j}x jump");
        assert!(has(&|s| s.jump == j && s.tail_df == Some(3.0)), "a {j}x jump with t(3) tails");
        assert!(has(&|s| s.jump == j && s.jump_at_confirm), "a {j}x jump at the phase boundary");
    }
    assert!(has(&|s| s.noise_growth > 0.0), "slowly rising noise");
    assert!(has(&|s| s.drift_per_run > 0.0 && s.ramp == 0.0), "a throttling trend");
    // Each name is one model: --only picks it out.
    let names: std::collections::HashSet<&str> = models.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), models.len());
}
