//! `ratchet-lab simulate` on the built binary: the table's columns, and the simulated night's
//! queue (the models' cells themselves are tested in process, in the library).

use assert_cmd::Command;
use predicates::prelude::*;
use ratchet::stats::sequential::{CONFIRM_GUARD, GUARD};

/// The lab binary, run outside any repository so the built-in [decision] defaults apply.
fn lab() -> Command {
    let mut c = Command::cargo_bin("ratchet-lab").unwrap();
    c.current_dir(std::env::temp_dir());
    c
}

#[test]
fn simulate_prints_the_table() {
    lab()
        // The grid alone: the binary's table and columns, in seconds (every model's cells are the
        // library's, tested in process).
        .args(["simulate", "--trials", "20", "--defaults", "--grid"])
        .assert()
        .success()
        .stdout(predicate::str::contains("| cv 1% + drift | +0% |").and(predicate::str::contains("MWU 10+10 keeps")));
}

#[test]
fn simulate_jobs_draws_the_queue_asked_for_and_refuses_an_unknown_one() {
    let out = lab().args(["simulate", "--defaults", "--jobs", "1,2", "--hypotheses", "200", "--queue", "win30"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains("+0%: 55%, -5%: 15%, +3%: 20%, +10%: 10%"), "{text}");
    assert!(text.contains("The serial loop on the same K devices, taken in turn"), "{text}");
    // No +1% hypothesis in this queue: its keep rate is "-", not 0%.
    let two = text.lines().find(|l| l.starts_with("| 2 | independent |")).expect("a 2-slot row");
    assert_eq!(two.split(" | ").nth(11), Some("-"), "{two}");
    lab()
        .args(["simulate", "--defaults", "--jobs", "2", "--queue", "win50"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("win50").and(predicate::str::contains("mix")).and(predicate::str::contains("win30")));
}

#[test]
fn simulate_tables_the_jump_models_with_clopper_pearson_intervals() {
    let out = lab().args(["simulate", "--defaults", "--trials", "20", "--null-trials", "40"]).assert().success();
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
    let out = lab().args(["simulate", "--defaults", "--trials", "4", "--null-trials", "4", "--only", "warm-up"]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| cv")).collect();
    // The warming machine, and the same 4x and 6x noisier: three gains each.
    assert_eq!(rows.len(), 9, "{text}");
    assert!(rows.iter().all(|r| r.starts_with("| cv 1% + 10% warm-up ramp")), "{text}");
    // The header says the rule simulated: the default's levels as recorded, the earlier rule's plan.
    lab()
        .args(["simulate", "--defaults", "--trials", "2", "--null-trials", "2", "--only", "=cv 1%"])
        .assert()
        .success()
        .stdout(predicate::str::contains("method RobustRatio: min effect 1%, levels {\"keep_at\":7.013"));
    lab().args(["simulate", "--defaults", "--method", "auto", "--trials", "2", "--null-trials", "2"]).assert().success().stdout(
        predicate::str::contains(format!(
            "variance guard on the log-ratios and the runs' sums at F level {GUARD} ({CONFIRM_GUARD} in the confirmation"
        )),
    );
}

#[test]
fn simulate_help_lists_every_noise_model() {
    let out = lab().args(["simulate", "--help"]).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let models = ratchet_lab::simulate::scenarios();
    for s in &models {
        assert!(text.lines().any(|l| l.trim() == s.name), "{} is not in --help:\n{text}", s.name);
    }
    // The models the power work asks for, by what each one is.
    let has = |f: &dyn Fn(&ratchet_lab::simulate::Scenario) -> bool| models.iter().any(f);
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
