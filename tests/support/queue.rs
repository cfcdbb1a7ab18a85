//! A three-hypothesis sweep queue on the fake benchmark (a gain 10 -> 5 ms, a do-nothing and a
//! loss to 20 ms), shared by the parallel-sweep tests.

use super::TestRepo;

/// fake.env lines are read in order and a later key wins: each hypothesis replaces its marker.
pub const ENV: &str = "FAKE_LATENCY_MS=10\n#a\n#b\n#c\n";
pub const QUEUE: [&str; 3] = ["01-faster.toml", "02-same.toml", "03-slower.toml"];

/// A sweep hypothesis `name` that replaces `from` with `to` in fake.env.
pub fn hypothesis(t: &TestRepo, name: &str, msg: &str, from: &str, to: &str) {
    t.write(
        &format!("experiments/{name}"),
        &format!("message = {msg:?}\n[[edit]]\nfile = \"fake.env\"\nfind = {from:?}\nreplace = {to:?}\n"),
    );
}

/// A repo whose ratchet.toml ends with `extra` (an `[engine]` table, say), with the queue
/// committed.
pub fn repo(extra: &str) -> TestRepo {
    let t = TestRepo::with_config(&format!("{}{extra}", super::DEFAULT_CONFIG));
    t.write("fake.env", ENV);
    hypothesis(&t, QUEUE[0], "exp: 10 -> 5 ms", "#a\n", "FAKE_LATENCY_MS=5\n");
    hypothesis(&t, QUEUE[1], "exp: 10 -> 10 ms", "#b\n", "FAKE_LATENCY_MS=10\n");
    hypothesis(&t, QUEUE[2], "exp: -> 20 ms", "#c\n", "FAKE_LATENCY_MS=20\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    t
}

/// The hypothesis files of the recorded rows, sorted.
pub fn names(t: &TestRepo) -> Vec<String> {
    let mut v: Vec<String> = t.rows().iter().map(|r| r["hypothesis"].split('@').next().unwrap().to_string()).collect();
    v.sort();
    v
}
