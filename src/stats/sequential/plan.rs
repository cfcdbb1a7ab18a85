//! The stopping rule: where the looks fall, the level each is tested at (alpha spent across
//! them), the futility level, the confirmation's plan and the pair budget.

use super::levels::{Levels, MIN_LOOK, OUTLIER_SHARE};
use super::stat::Test;
use super::Sequential;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// How the overall `alpha` is spread over the looks (Lan & DeMets 1983 spending functions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Spending {
    /// `alpha * ln(1 + (e - 1) t)`: spends early, for early keeps of large gains.
    #[default]
    Pocock,
    /// `2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))`: keeps almost all of alpha for the last look.
    OBrienFleming,
}

impl Spending {
    /// The alpha spent by information fraction `t` (pairs so far / maximum pairs), in [0, alpha].
    pub fn spent(self, alpha: f64, t: f64) -> f64 {
        let t = t.clamp(0.0, 1.0);
        if t == 0.0 {
            return 0.0;
        }
        match self {
            Spending::Pocock => alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln(),
            Spending::OBrienFleming => {
                let n = Normal::new(0.0, 1.0).expect("standard normal");
                2.0 - 2.0 * n.cdf(n.inverse_cdf(1.0 - alpha / 2.0) / t.sqrt())
            }
        }
    }
}

/// The procedure's parameters (from `[decision]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// Pairs before the first look.
    pub min_pairs: usize,
    /// Pairs at the last look: the budget.
    pub max_pairs: usize,
    /// Pairs between looks.
    pub look_every: usize,
    /// One-sided false-keep level of the first phase, across all its looks.
    pub alpha: f64,
    pub spending: Spending,
    /// The smallest gain worth keeping, in percent.
    pub min_effect_pct: f64,
    /// Stop for futility when the one-sided (1 - beta) upper bound of the gain is below the
    /// minimum effect. `None`: never stop early for futility.
    pub futility_beta: Option<f64>,
    /// Whether a keep must be confirmed by an independent batch in reversed order.
    pub confirm: bool,
    pub confirm_pairs: usize,
    pub confirm_alpha: f64,
    /// With `confirm`: a decision left unconfirmed or inconclusive measures on to this many
    /// pairs in all (both phases; clamped by [`Params::max_total_pairs`]), and is kept when the
    /// one-sided t-test over all of them passes at `rescue_alpha` with an estimate of at least
    /// the minimum effect. 0: no rescue (the rule of decisions recorded before it).
    #[serde(default)]
    pub rescue_pairs: usize,
    #[serde(default)]
    pub rescue_alpha: f64,
    /// Where the one-phase likelihood ratio of whole pairs (`likelihood::WholePairLr`, budget
    /// [`Params::max_total_pairs`]) decides in place of the two phases; without history the two
    /// phases always do.
    #[serde(default, skip_serializing_if = "OnePhase::is_never")]
    pub likelihood_ratio: OnePhase,
    /// The likelihood ratio's and the first look's levels, as numbers (`Levels`): recorded in
    /// the rule's own object, so a decision replays by them.
    #[serde(flatten)]
    pub levels: Levels,
    /// Where set, the robust ratio decides alone at these levels (`method = "robust-ratio"`),
    /// with or without history, over up to [`Params::max_total_pairs`] pairs of one phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robust: Option<super::RobustLevels>,
}

/// Where the likelihood ratio decides ([`Params::likelihood_ratio`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OnePhase {
    /// Never: the two phases (rules recorded before it).
    #[default]
    Never,
    /// Wherever there is history.
    WithHistory,
    /// Where the history set no gross outlier aside ([`super::Borrowed::outliers`]): the two
    /// phases' outlier rule keeps gains that outliers sink in a normal likelihood.
    WithoutOutliers,
    /// As `WithoutOutliers`, and until one of the decision's first `max_pairs` pairs is a gross
    /// outlier ([`super::likelihood::first_wild`]): from there the two phases decide on them.
    UntilOutlier,
}

impl OnePhase {
    fn is_never(&self) -> bool {
        *self == OnePhase::Never
    }

    /// Whether the likelihood ratio decides with a history whose pooled sessions saw `outliers`
    /// gross outliers (before any pair of the decision is read).
    pub fn decides(self, outliers: usize) -> bool {
        match self {
            OnePhase::Never => false,
            OnePhase::WithHistory => true,
            OnePhase::WithoutOutliers | OnePhase::UntilOutlier => outliers == 0,
        }
    }
}

impl Params {
    /// The unit tests' rule (the product's and the lab's): 4 to `max_pairs` pairs, a look every 2, alpha 0.05 (Pocock), a 1%
    /// minimum effect, futility at beta 0.2, a 6-pair confirmation at 0.02.
    #[doc(hidden)]
    pub fn for_tests(max_pairs: usize) -> Params {
        Params {
            min_pairs: 4,
            max_pairs,
            look_every: 2,
            alpha: 0.05,
            spending: Spending::Pocock,
            min_effect_pct: 1.0,
            futility_beta: Some(0.2),
            confirm: true,
            confirm_pairs: 6,
            confirm_alpha: 0.02,
            rescue_pairs: 0,
            rescue_alpha: 0.0,
            likelihood_ratio: OnePhase::Never,
            levels: Levels::first(),
            robust: None,
        }
    }
}

impl Params {
    /// A single look at `pairs` pairs with the whole alpha: the fixed-sample t-test.
    pub fn fixed(pairs: usize, alpha: f64, min_effect_pct: f64) -> Params {
        Params {
            min_pairs: pairs,
            max_pairs: pairs,
            look_every: 1,
            alpha,
            spending: Spending::Pocock,
            min_effect_pct,
            futility_beta: None,
            confirm: false,
            confirm_pairs: 0,
            confirm_alpha: alpha,
            rescue_pairs: 0,
            rescue_alpha: 0.0,
            likelihood_ratio: OnePhase::Never,
            levels: Levels::first(),
            robust: None,
        }
    }

    /// The pair counts at which the procedure looks: min_pairs, min_pairs + look_every, ...,
    /// and always max_pairs last.
    pub fn looks(&self) -> Vec<usize> {
        let mut v = vec![];
        let mut n = self.min_pairs.min(self.max_pairs);
        while n < self.max_pairs {
            v.push(n);
            n += self.look_every.max(1);
        }
        v.push(self.max_pairs);
        v
    }

    /// The significance level of each look: the increments of the spending function.
    pub fn look_alphas(&self) -> Vec<f64> {
        let looks = self.looks();
        let mut prev = 0.0;
        looks
            .iter()
            .map(|&n| {
                let cum = self.spending.spent(self.alpha, n as f64 / self.max_pairs as f64);
                let a = (cum - prev).max(0.0);
                prev = cum;
                a
            })
            .collect()
    }

    /// Most pairs a decision can take, confirmation and rescue included (outliers replaced
    /// with a borrowed scale aside: `Sequential::max_measured_pairs`). With the rescue:
    /// `rescue_pairs`, but at least the two phases' budget and at most twice it (a small
    /// budget, `--pairs 4`, stays small).
    pub fn max_total_pairs(&self) -> usize {
        let two = self.max_pairs + if self.confirm { self.confirm_pairs } else { 0 };
        if self.rescues() {
            self.rescue_pairs.clamp(two, 2 * two)
        } else {
            two
        }
    }

    /// The false-keep bound of the rule under no gain, by the union bound over its two ways to
    /// keep: the two phases (`alpha x confirm_alpha`, or `alpha` unconfirmed) and the rescue.
    pub fn false_keep_bound(&self) -> f64 {
        let two = if self.confirm { self.alpha * self.confirm_alpha } else { self.alpha };
        two + if self.rescues() { self.rescue_alpha } else { 0.0 }
    }

    /// Whether an unconfirmed or inconclusive decision goes on to the rescue's t-test.
    pub fn rescues(&self) -> bool {
        self.confirm && self.rescue_pairs > 0 && self.rescue_alpha > 0.0
    }
}

/// Most gross outliers set aside among `m` measured pairs: one in [`OUTLIER_SHARE`] (at least
/// one). More than that is not a rare outlier but the noise itself: then nothing is set aside.
pub(super) fn allowed_outliers(m: usize) -> usize {
    (m / OUTLIER_SHARE).max(1)
}

impl Sequential {
    /// The first phase's look levels: the spending function's increments, except that with a
    /// borrowed scale the first look spends only `first_share` of its increment and the second
    /// the rest (their sum, and so the union bound, is unchanged). The first look has the fewest
    /// own df to check the borrowed scale on (2 at 2 pairs), so a noise jump the guard misses
    /// passes there most often; a large gain still passes it at the smaller level.
    pub fn main_alphas(&self, p: &Params) -> Vec<f64> {
        let mut alphas = p.look_alphas();
        if let Some(b) = self.borrowed.as_ref().filter(|_| alphas.len() > 1) {
            let share = b.first_share.clamp(0.0, 1.0);
            alphas[1] += alphas[0] * (1.0 - share);
            alphas[0] *= share;
        }
        alphas
    }

    /// The first phase's params as run: with a borrowed scale the first look comes after
    /// `first_look` pairs (the scale need not be estimated from the batch itself), or
    /// `OUTLIER_FIRST_LOOK` where the history shows a second population of runs
    /// ([`super::Borrowed::main_first_look`]).
    pub fn main_params(&self) -> Params {
        match &self.borrowed {
            Some(b) if self.params.min_pairs < self.params.max_pairs => {
                let p = &self.params;
                let first = b.main_first_look(&p.levels);
                // No history looks later than none would (`min_pairs`), except for the wait for a
                // slow mode's streak, which is kept whole.
                let cap = if p.levels.first_look_two_modes > 0 && b.waits_longer() { p.min_pairs.max(first) } else { p.min_pairs };
                Params { min_pairs: first.max(MIN_LOOK).min(cap), ..p.clone() }
            }
            _ => self.params.clone(),
        }
    }

    /// The confirmation's looks and their levels: one look at `confirm_pairs` with the whole
    /// `confirm_alpha`, or, with a borrowed scale, looks from `first_look` every `look_every`
    /// pairs with `confirm_alpha` spent across them (O'Brien-Fleming-type).
    pub fn confirm_plan(&self) -> (Vec<usize>, Vec<f64>) {
        let p = &self.params;
        match &self.borrowed {
            Some(b) if p.confirm_pairs + b.confirm_extra > b.first_look => {
                let c = Params {
                    min_pairs: b.first_look.max(MIN_LOOK),
                    max_pairs: p.confirm_pairs + b.confirm_extra,
                    look_every: p.look_every,
                    alpha: p.confirm_alpha,
                    // Keeps most of the level for the batch's last look: a large gain still
                    // passes at the first, a moderate one is not lost to early looks.
                    spending: Spending::OBrienFleming,
                    ..p.clone()
                };
                (c.looks(), c.look_alphas())
            }
            _ => (vec![p.confirm_pairs], vec![p.confirm_alpha]),
        }
    }

    /// Most pairs one batch of `n` tested pairs may measure, replacements of outliers included.
    pub(super) fn cap(&self, n: usize) -> usize {
        if self.borrowed.is_some() {
            n + allowed_outliers(n)
        } else {
            n
        }
    }

    /// Most pairs a decision can measure, confirmation, replaced outliers and rescue included.
    pub fn max_measured_pairs(&self) -> usize {
        if let Some(l) = self.params.robust {
            return l.pairs;
        }
        let two = self.two_phase_pairs().max(self.rescue_total());
        match self.likelihood_ratio() {
            Some((_, test)) if self.params.likelihood_ratio == OnePhase::UntilOutlier => test.max_pairs.max(two),
            Some((_, test)) => test.max_pairs,
            None => two,
        }
    }

    /// The budget of the one-phase test that decides, where one does (the robust ratio, or the
    /// likelihood ratio with history); `None`: the two phases.
    pub fn one_phase_budget(&self) -> Option<usize> {
        match self.params.robust {
            Some(l) => Some(l.pairs),
            None => self.likelihood_ratio().map(|(_, t)| t.max_pairs),
        }
    }

    /// Most pairs the two phases can measure, replaced outliers included.
    fn two_phase_pairs(&self) -> usize {
        let p = &self.params;
        let extra = self.borrowed.as_ref().map_or(0, |b| b.confirm_extra);
        self.cap(p.max_pairs) + if p.confirm { self.cap(p.confirm_pairs + extra) } else { 0 }
    }

    /// The pairs the rescue's t-test reads (0: no rescue): [`Params::max_total_pairs`], a
    /// constant of the rule, so that the test is a fixed-sample one whatever the phases did
    /// before it (with outliers replaced they may have measured more: it reads the first).
    pub(super) fn rescue_total(&self) -> usize {
        if self.params.rescues() {
            self.params.max_total_pairs()
        } else {
            0
        }
    }

    /// The level of the futility bound at a first-phase look: early (before `min_pairs`) or
    /// borrowed-scale levels, the configured one, or at the last look a plain `alpha`; `None`
    /// where this look cannot stop for futility.
    pub(super) fn futility_level(&self, t: &Test, last: bool) -> Option<f64> {
        let p = &self.params;
        let futility_beta = match &self.borrowed {
            Some(b) if p.futility_beta.is_some() && t.n < p.min_pairs => Some(b.early_beta),
            Some(b) if p.futility_beta.is_some() => Some(b.futility_beta),
            _ => p.futility_beta,
        };
        match (futility_beta, last) {
            (Some(b), _) => Some(b),
            (None, true) => Some(p.alpha),
            (None, false) => None,
        }
    }
}
