//! The noise jumping above its history: the confirmation's looser variance guard sees
//! a confirmation batch noisier than history that the old guard (F level 0.05 on 2 df) let pass
//! on the borrowed scale.
//! (`ratchet-lab simulate` tables the jump models: lab/tests/simulate.rs.)

use ratchet::stats::sequential::{
    Borrowed, Next, NoiseScale, OnePhase, Params, Phase, Sequential, Spending, CONFIRM_BETA, CONFIRM_GUARD, GUARD,
};
use ratchet::stats::Verdict;

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
        levels: ratchet::stats::sequential::Levels::first(),
        robust: None,
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
