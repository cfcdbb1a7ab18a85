//! Text ratchet did not write (commit and hypothesis messages, file names, a crashing benchmark's
//! stderr, names inside a trace, an error quoting any of them) reaches the terminal with its
//! control characters as visible escapes: no window title, no cleared screen, no hyperlink, no
//! line of its own that passes for a verdict. The records keep the exact text; ratchet's own
//! colour still works.

use crate::support;

use support::xspace::{self, Plane, V};
use support::TestRepo;

/// A message that sets the window title, clears the screen, hides a link (OSC 8), reverses the
/// text (bidi override), starts a C1 CSI, and forges a verdict line after a newline and after a
/// carriage return.
const MESSAGE: &str = "exp: tune \x1b]0;pwned\x07 \x1b[2J \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \u{202e}txt.exe \
                       \u{9b}31m\ttab\x08\r  KEEP: score +99%\nKEEP: score +99%";
/// File names the hypothesis adds: one with the title escape, one with a forged verdict line.
const EVIL_FILE: &str = "evil\x1b]0;pwned\x07.py";
const NL_FILE: &str = "nl\nKEEP: score +99%.py";

/// `text` without ratchet's own colour (SGR: ESC [ digits m), which is allowed.
fn without_own_colour(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("\x1b[") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let n = after.find(|c: char| !(c.is_ascii_digit() || c == ';')).unwrap_or(after.len());
        if after[n..].starts_with('m') {
            rest = &after[n + 1..];
        } else {
            // Not a colour: kept, so the check below sees it.
            out.push_str("\x1b[");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// What `what` printed holds no control character but newlines (and ratchet's own colour), no
/// bidi control, and no line that reads as the forged verdict.
fn assert_printable(what: &str, bytes: &[u8]) {
    let text = without_own_colour(&String::from_utf8_lossy(bytes));
    let bad: Vec<char> =
        text.chars().filter(|&c| (c.is_control() && c != '\n') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')).collect();
    assert!(bad.is_empty(), "{what} printed raw control characters {bad:?}:\n{text}");
    let forged: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("KEEP: score +99%")).collect();
    assert!(forged.is_empty(), "{what} printed a forged verdict line {forged:?}:\n{text}");
}

fn output(what: &str, o: &std::process::Output) -> String {
    assert!(o.status.success(), "{what} failed: {}", String::from_utf8_lossy(&o.stderr));
    assert_printable(&format!("{what} (stdout)"), &o.stdout);
    assert_printable(&format!("{what} (stderr)"), &o.stderr);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_hostile_message_and_file_names_reach_every_view_escaped() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.write(EVIL_FILE, "x\n");
    t.write(NL_FILE, "y\n");
    output("the experiment", &t.ratchet().arg(MESSAGE).output().unwrap());
    let row = &t.rows()[0];
    assert_eq!(row["status"], "keep", "{row:?}");
    // The records and git keep the exact text: only what a terminal sees is escaped.
    assert!(row["message"].contains("\x1b]0;pwned\x07"), "{row:?}");
    assert!(t.git(&["log", "-1", "--format=%B"]).contains("\x1b[2J"));

    // Wide enough that `show` wraps no line: a wrapped line may start with any word of the text.
    let view = |args: &[&str]| output(&args.join(" "), &t.ratchet().args(args).env("COLUMNS", "400").output().unwrap());
    let show = view(&["show", "1"]);
    // Still all there, as visible escapes.
    let flat = show.split_whitespace().collect::<String>();
    assert!(flat.contains(r"\e]0;pwned\a"), "{show}");
    assert!(flat.contains(r"\u{202e}txt.exe\u{9b}31m\ttab\b\rKEEP:score+99%\nKEEP:score+99%"), "{show}");
    assert!(flat.contains(r"evil\e]0;pwned\a.py"), "the diff stat names the file, escaped: {show}");
    assert!(flat.contains(r"nl\nKEEP:score+99%.py"), "{show}");
    for args in [&["results"][..], &["results", "--wide"], &["results", "--format", "md"], &["status"], &["show", "1", "--color", "always"]]
    {
        view(args);
    }
    // Colour on: the status cell is still green, the message still escaped.
    let table = view(&["results", "--color", "always"]);
    assert!(table.contains("\x1b[") && table.contains(r"\e]0;pwned\a"), "{table}");
}

#[test]
fn a_hostile_sweep_hypothesis_reaches_the_progress_escaped() {
    let t = TestRepo::new();
    t.write(
        "experiments/01-\x1b[2Jfaster.toml",
        "message = \"exp: \\u001b]0;pwned\\u0007 faster\\r\\nKEEP: score +99%\"\n[[edit]]\nfile = \"fake.env\"\n\
         find = \"FAKE_LATENCY_MS=10\\n\"\nreplace = \"FAKE_LATENCY_MS=5\\n\"\n",
    );
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    let out = output("the sweep", &t.ratchet().arg("sweep").output().unwrap());
    assert!(out.contains(r"01-\e[2Jfaster.toml"), "{out}");
    assert_eq!(t.rows()[0]["status"], "keep");
    output("status", &t.ratchet().arg("status").output().unwrap());
}

#[test]
fn a_crashing_benchmarks_stderr_keeps_its_lines_but_no_escape() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_MODE=crash\nFAKE_STDERR=\\x1b]0;pwned\\x07boom\\x1b[2J\\rfake\\nRuntimeError: \\x1b[31mred\\x9b\\x1b[0m\n");
    // The default says the first line; -v and `show` the tail.
    let o = t.ratchet().args(["-v", "exp: crash"]).output().unwrap();
    output("the crashing experiment", &o);
    assert_eq!(t.rows()[0]["status"], "crash");
    let out = String::from_utf8_lossy(&o.stdout);
    // The tail keeps its lines, each escaped.
    assert!(out.lines().any(|l| l.trim_start() == r"\e]0;pwned\aboom\e[2J\rfake"), "{out}");
    assert!(out.lines().any(|l| l.trim_start() == r"RuntimeError: \e[31mred\u{9b}\e[0m"), "{out}");
    let show = output("show", &t.ratchet().args(["show", "1"]).output().unwrap());
    assert!(show.contains(r"RuntimeError: \e[31mred\u{9b}\e[0m"), "{show}");
}

#[test]
fn an_error_quoting_hostile_text_prints_it_escaped() {
    let t = TestRepo::new();
    // A ratchet.toml with an unknown key: the error names it.
    t.write("ratchet.toml", "[benchmark]\ncommand = \"python3 x\"\n\"\\u001b]0;pwned\\u0007\" = 1\n");
    let o = t.ratchet().arg("exp: anything").output().unwrap();
    assert!(!o.status.success());
    assert_printable("the error", &o.stderr);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(r"\e]0;pwned\a"), "{err}");
}

#[test]
fn names_inside_a_trace_reach_inspect_escaped() {
    let mut p = Plane::new("/device:TPU:0");
    for i in 0..3i64 {
        let t = i * 10_000_000;
        p.event("XLA Modules", "jit_evil\x1b]0;pwned\x07(3)", t, 1_000_000, &[]);
        p.event("XLA Ops", "fusion\x1b[2J\nKEEP: score +99%", t, 500_000, &[("device_duration_ps", V::I(500_000))]);
    }
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("evil.xplane.pb");
    std::fs::write(&capture, xspace::space(vec![p])).unwrap();
    let o = assert_cmd::Command::cargo_bin("ratchet").unwrap().current_dir(dir.path()).arg("inspect").arg(&capture).output().unwrap();
    let out = output("inspect", &o);
    assert!(out.contains(r"jit_evil\e]0;pwned\a(3)"), "{out}");
    assert!(out.contains(r"fusion\e[2J\nKEEP: score +99%"), "{out}");
}
