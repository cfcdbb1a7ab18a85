//! The unlucky users of `ratchet-lab simulate` (lab/notes/decisions-history.md, "The user whose calibration came
//! out low"): for each model whose calibration is drawn from its lowest tail, how low the
//! borrowed sds are and what else those calibrations saw (a gross outlier, which routes `auto` to
//! the two phases; one mode; a warm-up). `cargo run --release -p ratchet-lab --example unlucky_probe`.

use ratchet_lab::simulate::{scenarios, unlucky_calibrations};
fn main() {
    for s in scenarios().into_iter().filter(|s| s.calibration_tail > 0.0) {
        let truth = std::f64::consts::SQRT_2 * s.run_sd();
        let pool = unlucky_calibrations(&s);
        let mut r: Vec<f64> = pool.iter().map(|b| b.scale.sd / truth).collect();
        r.sort_by(f64::total_cmp);
        let out = pool.iter().filter(|b| b.outliers > 0).count();
        let one = pool.iter().filter(|b| b.one_mode()).count();
        let warm = pool.iter().filter(|b| b.shows_warmup()).count();
        println!(
            "{}: {} users, sd {:.3}x-{:.3}x (median {:.3}x) of the truth; gross outlier seen {}, one mode {}, warm-up {}",
            s.name,
            pool.len(),
            r[0],
            r[r.len() - 1],
            r[r.len() / 2],
            out,
            one,
            warm
        );
    }
}
