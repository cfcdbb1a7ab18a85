//! The morning review reads right at 80 and 120 columns, leads with speed-ups, keeps
//! every row on one line (in the table and in results.csv), and the wide table keeps everything.

use crate::support;
use crate::support::demo;

use demo::demo_rows;
use ratchet::store::Store;
use support::TestRepo;

fn repo_with_demo() -> TestRepo {
    let t = TestRepo::new();
    demo::write_demo(t.path());
    t
}

fn results(t: &TestRepo, cols: &str, extra: &[&str]) -> String {
    let out = t.ratchet().arg("results").args(extra).env("COLUMNS", cols).env_remove("NO_COLOR").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_table_fits_80_and_120_columns_with_whole_hashes() {
    let t = repo_with_demo();
    for width in [80usize, 120] {
        let text = results(&t, &width.to_string(), &[]);
        eprintln!("--- COLUMNS={width}: {} lines\n{text}", text.lines().count());
        for l in text.lines() {
            assert!(l.chars().count() <= width, "line wider than {width}: {l:?}");
        }
        // One line per row: header, two rules, nine rows, and a short footer.
        assert!(text.lines().count() <= 9 + 3 + 5, "{text}");
        for r in demo_rows() {
            assert!(text.lines().any(|l| l.trim_start().starts_with(&format!("{} ", r.id))), "row {} missing:\n{text}", r.id);
        }
        assert!(text.contains("speed-up"), "{text}");
        if width >= 120 {
            // Commits are shown whole, never split across lines.
            for r in demo_rows() {
                assert!(text.contains(&r.commit[..8]), "commit of {} split or missing:\n{text}", r.id);
            }
        }
    }
    // The crash's many-line note never spills into the table.
    let text = results(&t, "80", &[]);
    assert!(!text.contains("Traceback"), "{text}");
}

#[test]
fn speed_ups_lead_and_the_score_change_sits_beside() {
    let t = repo_with_demo();
    let text = results(&t, "100", &[]);
    // Keep 1: score +85% is a 1.36x speed-up, latency -26.5%.
    let row1 = text.lines().find(|l| l.trim_start().starts_with("1 ")).unwrap();
    assert!(row1.contains("1.36x") && row1.contains("-26.5%") && row1.contains("+85.0%"), "{row1}");
    // The night: the kept rows chained, score x 1.85 x 2.4 x 10 x 4.4 = x195.4, a 13.98x
    // speed-up, latency -92.8%.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("kept changes chained: 14.0x faster (latency -92.8%), the product of 4 kept rows' speed-ups"), "{text}");
    assert!(flat.contains("score median 1.23 at the first baseline, 240 at the latest keep"), "{text}");
    // `show` says the same in the same words.
    let show = t.ratchet().args(["show", "1"]).output().unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("speed-up 1.36x [1.35-1.37], latency -26.5%, score +85.0%"), "{show}");
}

#[test]
fn a_latency_gain_reads_as_faster() {
    // With latency deciding, delta_pct +193% is a 2.93x speed-up: latency -65.9%, never "+193%".
    let mut r = demo_rows().remove(0);
    r.metric = "latency".into();
    (r.delta_pct, r.ci_low_pct, r.ci_high_pct, r.speedup_pct) = (Some(193.0), Some(180.0), Some(206.0), None);
    assert_eq!(ratchet::report::speedup_line(&r).unwrap(), "speed-up 2.93x [2.80-3.06], latency -65.9%");
}

#[test]
fn wide_shows_every_column_on_one_line_per_row() {
    let t = repo_with_demo();
    let text = results(&t, "80", &["--wide"]);
    for col in ["commit", "latency ms", "util %", "regime", "runs", "note", "p"] {
        assert!(text.contains(col), "{col} missing:\n{text}");
    }
    assert_eq!(text.lines().filter(|l| l.contains("✗ crash")).count(), 1, "{text}");
    assert!(text.contains("candidate crashed (exit 1): ⏎ Traceback"), "{text}");
    for r in demo_rows() {
        assert!(text.contains(&r.commit[..8]));
    }
}

#[test]
fn results_csv_keeps_one_line_per_row_and_show_the_whole_note() {
    let t = repo_with_demo();
    let csv = t.read("results/results.csv");
    assert_eq!(csv.lines().count(), 1 + demo_rows().len(), "{csv}");
    assert!(csv.contains("candidate crashed (exit 1):\\nTraceback"), "{csv}");
    // Reading it back restores the text: `show` prints the full note.
    let rows = Store::new(&t.path().join("results")).rows().unwrap();
    assert_eq!(rows[5].note, demo_rows()[5].note);
    let show = t.ratchet().args(["show", "6"]).output().unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("ValueError: bf16 accumulation overflowed"), "{show}");
    // The export is one line per row too.
    let out = t.ratchet().args(["results", "--format", "csv"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1 + demo_rows().len());
}

#[test]
fn color_follows_no_color_and_the_flag() {
    let t = repo_with_demo();
    let plain = results(&t, "100", &[]);
    assert!(!plain.contains('\x1b'), "a pipe gets no colour");
    let forced = results(&t, "100", &["--color", "always"]);
    assert!(forced.contains("\x1b[1;32m✔ keep"), "{forced}");
    for l in forced.lines() {
        let visible = l.replace("\x1b[1;32m", "").replace("\x1b[31m", "").replace("\x1b[33m", "").replace("\x1b[0m", "");
        assert!(visible.chars().count() <= 100, "{l:?}");
    }
    let out = t.ratchet().args(["results", "--color", "never"]).env("COLUMNS", "100").output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
}

#[test]
fn durations_need_a_unit() {
    let t = TestRepo::new();
    t.ratchet()
        .args(["sweep", "--max-wall", "8"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("\"8\" has no unit; write 8h, 8m or 8s"));
    t.ratchet().args(["results", "--since", "12"]).assert().code(2);
    assert!(ratchet::sweep::parse_duration("1h30m").is_ok());
}

/// `ratchet results` on a real terminal (a pty from util-linux `script`), with `env` settings.
fn on_a_terminal(t: &TestRepo, env: &str) -> Option<String> {
    if std::process::Command::new("script").arg("--version").output().is_err() {
        return None;
    }
    let bin = assert_cmd::cargo::cargo_bin("ratchet");
    let cmd = format!("env -u NO_COLOR COLUMNS=100 {env} {} results", bin.display());
    let out = std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]).current_dir(t.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_terminal_gets_colour_unless_no_color_or_a_dumb_term() {
    let t = repo_with_demo();
    let Some(plain_term) = on_a_terminal(&t, "TERM=xterm") else {
        eprintln!("NOTE: util-linux `script` not available: the terminal colour check is skipped");
        return;
    };
    assert!(plain_term.contains("\x1b[1;32m✔ keep"), "{plain_term}");
    assert!(!on_a_terminal(&t, "TERM=xterm NO_COLOR=1").unwrap().contains("\x1b["));
    assert!(!on_a_terminal(&t, "TERM=dumb").unwrap().contains("\x1b["));
}

#[test]
fn without_columns_the_terminal_width_is_used() {
    let t = repo_with_demo();
    if std::process::Command::new("script").arg("--version").output().is_err() {
        eprintln!("NOTE: util-linux `script` not available: the terminal width check is skipped");
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("ratchet");
    // `script`'s terminal has no size of its own: give it rows too, as every real terminal has
    // (a size with 0 rows reads as no terminal size at all).
    let cmd = format!("stty rows 24 cols 72; env -u COLUMNS {} results --color never", bin.display());
    let out = std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]).current_dir(t.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(text.contains("✔ keep"), "{text}");
    for l in text.lines() {
        assert!(l.chars().count() <= 72, "wider than the 72-column terminal: {l:?}");
    }
}
