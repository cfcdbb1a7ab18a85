//! The probe of the variance guard: the figures docs/decisions.md's probe table quotes
//! for one variant of the borrowed-scale knobs (false keeps when the noise jumps above its
//! history, runs per decision over the grid, power), from `ratchet-lab simulate`'s own cells.
//!
//! `cargo run --release -p ratchet-lab --example jump_probe -- [key=value ...]`, keys: seed, null (trials per
//! null cell), grid (trials per grid cell), power (trials per power cell), stationary (1: also
//! the worst stationary null cells), detail (1: each grid cell), sums (0/1: the guard also sees
//! the runs' sums), safety, guard, confirm_guard, retest_guard (0: off), confirm_extra,
//! first_look, first_share, beta, early_beta, confirm_beta,
//! bimodal (1: also +10% at CV 1%, the bimodal and warm-up +3% cells and the bimodal and t(3)
//! null cells), warmup (the first sum differences the guard may read around the history's
//! warm-up profile; 0: none), warmup_z (how far from zero a profile's step must be), look_every,
//! max_pairs, min_pairs, alpha, confirm_alpha, confirm_pairs and rescue_pairs (`[decision]`'s
//! own), ramp (1: the warm-up models' cells at +0%, +3% and
//! +10%, and their null cells 4x and 6x noisier), threads; jumps=1.25,4,... (more null cells:
//! the noise that multiple of its history's); breakdown=SCENARIO (or breakdown=4x): where its
//! false keeps come from. Defaults: the procedure's.

#[path = "common/args.rs"]
mod args;

use ratchet::config::DecisionConfig;
use ratchet::stats::sequential::{Borrowed, NoiseScale, Sequential};
use ratchet_lab::simulate::{scenarios, simulate_cell, wilson, Scenario, EFFECTS};
use std::collections::HashMap;

/// One cell to simulate: label, scenario, true gain, trials.
type Job = (String, Scenario, f64, usize);

fn main() {
    let kv = args::Args::from_env();
    let num = |k: &str, d: f64| kv.num(k, d);
    let seed = num("seed", 1.0) as u64;
    let (null, grid, power) = (num("null", 20000.0) as usize, num("grid", 400.0) as usize, num("power", 1600.0) as usize);
    let threads = num("threads", 2.0) as usize;
    let template = {
        let b = Borrowed::new(NoiseScale { sd: 0.0, df: 0.0 });
        Borrowed {
            sums: (num("sums", 1.0) != 0.0).then_some(NoiseScale { sd: 0.0, df: 0.0 }),
            retest_guard: num("retest_guard", b.retest_guard),
            confirm_extra: num("confirm_extra", b.confirm_extra as f64) as usize,
            safety: num("safety", b.safety),
            guard: num("guard", b.guard),
            confirm_guard: num("confirm_guard", b.confirm_guard),
            first_look: num("first_look", b.first_look as f64) as usize,
            futility_beta: num("beta", b.futility_beta),
            early_beta: num("early_beta", b.early_beta),
            confirm_beta: num("confirm_beta", b.confirm_beta),
            first_share: num("first_share", b.first_share),
            warmup_positions: num("warmup", b.warmup_positions as f64) as usize,
            warmup_z: num("warmup_z", b.warmup_z),
            ..b
        }
    };
    // The look grid's knobs, `[decision]`'s own: look_every, max_pairs (the spending's horizon).
    let cfg = {
        let d = DecisionConfig::earlier();
        DecisionConfig {
            look_every: num("look_every", d.look_every as f64) as u32,
            max_pairs: num("max_pairs", d.max_pairs as f64) as u32,
            min_pairs: num("min_pairs", d.min_pairs as f64) as u32,
            alpha: num("alpha", d.alpha),
            confirm_alpha: num("confirm_alpha", d.confirm_alpha),
            confirm_pairs: num("confirm_pairs", d.confirm_pairs as f64) as u32,
            rescue_pairs: num("rescue_pairs", d.rescue_pairs as f64) as u32,
            ..d
        }
    };
    let cfg = &cfg;
    let all = scenarios();
    if let Some(name) = kv.get("breakdown") {
        breakdown(&all, name, &template, num("null", 20000.0) as usize, seed);
        return;
    }
    let by = |name: &str| all.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name}")).clone();
    let mut jobs: Vec<Job> = vec![];
    for n in ["cv 1%, 1.5x history", "cv 1%, 2x history", "cv 1%, 3x history", "cv 1% rising to 3x history", "AR(1) 0.5, cv 2%, 2x history"]
    {
        jobs.push((format!("null {n}"), by(n), 0.0, null));
    }
    // More jump sizes: jumps=1.25,4,6 (the noise that multiple of its history's, cv 1% there).
    for j in kv.get("jumps").map(|v| v.split(',').map(|x| x.parse::<f64>().expect("jumps")).collect::<Vec<_>>()).unwrap_or_default() {
        let s = jumped(&all, j);
        jobs.push((format!("null {}", s.name), s, 0.0, null));
    }
    if num("stationary", 0.0) != 0.0 {
        for n in ["cv 0.5% bimodal", "cv 1% + 2% 3x outliers", "cv 1% + 5% 3x outliers", "cv 3%", "AR(1) 0.5, cv 3%", "cv 1% bimodal 50/50"]
        {
            jobs.push((format!("null {n}"), by(n), 0.0, null));
        }
    }
    jobs.push(("power +3% cv 1%".into(), by("cv 1%"), 0.03, power));
    for (n, e) in [
        ("cv 1%", 0.10),
        ("cv 1% bimodal 10% 5% slower", 0.03),
        ("cv 1% + 10% warm-up ramp", 0.03),
        ("cv 1% bimodal 10% 5% slower", 0.0),
        ("t(3) tails, cv 1%", 0.0),
    ] {
        if num("bimodal", 0.0) != 0.0 {
            jobs.push((
                format!("{} {n} {:+.0}%", if e > 0.0 { "power" } else { "null" }, e * 100.0),
                by(n),
                e,
                if e > 0.0 { power } else { null },
            ));
        }
    }
    // ramp=1: the warm-up models' cells (a 10% ramp; a 12% one with a slow drift).
    if num("ramp", 0.0) != 0.0 {
        for n in ["cv 1% + 10% warm-up ramp", "cv 1% + drift"] {
            for (e, t) in [(0.0, null), (0.03, power), (0.10, power)] {
                jobs.push((format!("ramp {n} {:+.0}%", e * 100.0), by(n), e, t));
            }
        }
        for n in ["cv 1% + 10% warm-up ramp, 4x history", "cv 1% + 10% warm-up ramp, 6x history"] {
            jobs.push((format!("null {n}"), by(n), 0.0, null));
        }
    }
    jobs.push(("power +10% 2% outliers".into(), by("cv 1% + 2% 3x outliers"), 0.10, power));
    for s in all.iter().filter(|s| s.grid) {
        for &e in &EFFECTS {
            jobs.push((format!("grid {} {:+.0}%", s.name, e * 100.0), s.clone(), e, grid));
        }
    }
    let started = std::time::Instant::now();
    let results: Vec<(String, usize, usize, f64)> = std::thread::scope(|sc| {
        let chunks: Vec<Vec<(usize, Job)>> =
            (0..threads).map(|t| jobs.iter().cloned().enumerate().filter(|(i, _)| i % threads == t).collect()).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let template = template.clone();
                sc.spawn(move || {
                    let seq = Sequential::new(cfg.params(None)).with_history(Some(template));
                    chunk
                        .into_iter()
                        .map(|(i, (label, s, e, n))| {
                            let c = simulate_cell(&seq, &s, e, n, seed.wrapping_mul(1_000_003).wrapping_add(i as u64 * 7919), true);
                            (i, (label, c.keeps, c.trials, c.mean_runs()))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut v: Vec<(usize, (String, usize, usize, f64))> = handles.into_iter().flat_map(|h| h.join().expect("thread")).collect();
        v.sort_by_key(|x| x.0);
        v.into_iter().map(|x| x.1).collect()
    });
    let mut grid_runs = vec![];
    for (label, k, n, runs) in &results {
        if label.starts_with("grid") {
            grid_runs.push(*runs);
            if num("detail", 0.0) != 0.0 {
                println!("{label:40} kept {:6.2}%  runs {runs:.2}", *k as f64 / *n as f64 * 100.0);
            }
            continue;
        }
        let (lo, hi) = wilson(*k, *n);
        println!("{label:40} {:7.3}% [{:.3}, {:.3}]  runs {runs:.2}", *k as f64 / *n as f64 * 100.0, lo * 100.0, hi * 100.0);
    }
    println!("{:40} {:.2}", "runs per decision (grid)", grid_runs.iter().sum::<f64>() / grid_runs.len() as f64);
    eprintln!("{:.1} s", started.elapsed().as_secs_f64());
}

/// The noise `j` times its history's (cv 1% in the history), like the table's jump cells.
fn jumped(all: &[Scenario], j: f64) -> Scenario {
    let base = all.iter().find(|s| s.name == "cv 1%, 2x history").expect("the 2x cell");
    let name: &'static str = Box::leak(format!("cv 1%, {j}x history").into_boxed_str());
    Scenario { name, jump: j, cv: 0.01 * j, ..base.clone() }
}

/// Where the false keeps of one null cell come from: (first-phase pairs, its scale,
/// confirmation pairs, its scale) with counts.
fn breakdown(all: &[Scenario], name: &str, template: &Borrowed, trials: usize, seed: u64) {
    use ratchet::stats::rng::Rng;
    use ratchet_lab::simulate::{calibrated_scale, decide_on, session, with_knobs};
    // breakdown=4x: the noise 4x its history's.
    let s = match name.strip_suffix('x').and_then(|j| j.parse::<f64>().ok()) {
        Some(j) => jumped(all, j),
        None => all.iter().find(|s| s.name == name).expect("scenario").clone(),
    };
    let s = &s;
    let seq = Sequential::new(DecisionConfig::earlier().params(None));
    let mut tally: HashMap<String, usize> = HashMap::new();
    for t in 0..trials {
        let mut rng = Rng::new(seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let b = with_knobs(calibrated_scale(s, &mut rng), Some(template));
        let seq = seq.clone().with_history(b);
        let states = session(s, 200, s.jump, &mut rng);
        let (d, _) = decide_on(&seq, &states, 0.0);
        if d.verdict == ratchet::stats::Verdict::Keep {
            // A keep by the rescue has no passed confirmation to name.
            let key = match (d.confirmation.as_ref().filter(|c| c.passed), d.trail.last()) {
                (Some(c), Some(cl)) => format!(
                    "main {} pairs {} | confirm {} pairs {}",
                    d.pairs,
                    d.trail.iter().find(|l| l.pairs == d.pairs).map_or("?", |l| l.scale.as_str()),
                    c.pairs,
                    cl.scale
                ),
                _ => format!("rescue ({} pairs in the first phase)", d.pairs),
            };
            *tally.entry(key).or_default() += 1;
        }
    }
    let mut v: Vec<_> = tally.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    for (k, n) in v {
        println!("{n:6} {k}");
    }
}
