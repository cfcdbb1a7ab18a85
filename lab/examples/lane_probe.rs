//! The merge lane's design probes: `ratchet-lab simulate --jobs`'s table for designs and tests the
//! controller does not have, so that docs/scale-out.md's figures for them are a command away.
//!
//! `cargo run --release -p ratchet-lab --example lane_probe -- [key=value ...]`, keys: queue (mix, win30),
//! slots (1,2,4,8), hypotheses (20000), seed (20260522), speculate (0/1: a first trial whose
//! first phase passed joins the chain at once, `ratchet_lab::parallel::ParallelPlan::speculate`),
//! test (procedure, or sprt: Wald's test with the noise known, the floor of any test at the
//! serial loop's levels, `ratchet_lab::parallel::TrialTest`; one phase, so `speculate` changes nothing
//! with it). Defaults: `ratchet-lab simulate --defaults --jobs 1,2,4,8 --hypotheses 20000`.

#[path = "common/args.rs"]
mod args;

use ratchet::config::DecisionConfig;
use ratchet::stats::sequential::Sequential;
use ratchet_lab::chain_sim::{table, Night};
use ratchet_lab::parallel::{Queue, TrialTest};

fn main() {
    let kv = args::Args::from_env();
    let get = |k: &str, d: &str| kv.get(k).cloned().unwrap_or_else(|| d.to_string());
    let num = |k: &str, d: &str| get(k, d).parse::<u64>().unwrap_or_else(|_| panic!("{k}={}: not a count", get(k, d)));
    let queue: Queue = get("queue", "mix").parse().unwrap_or_else(|e| panic!("{e}"));
    let slots: Vec<usize> = get("slots", "1,2,4,8").split(',').map(|s| s.parse().expect("slots=1,2,4")).collect();
    let test = match get("test", "procedure").as_str() {
        "procedure" => TrialTest::Procedure,
        "sprt" => TrialTest::KnownNoiseSprt,
        other => panic!("test={other}: procedure or sprt"),
    };
    let cv1 = ratchet_lab::simulate::scenario("cv 1%");
    let night = Night {
        slots: &slots,
        hypotheses: num("hypotheses", "20000") as usize,
        queue,
        seed: num("seed", "20260522"),
        second_device: false,
        scenario: &cv1,
        test,
        speculate: num("speculate", "0") != 0,
    };
    println!("queue {} ({}), trials by {:?}, speculating: {}", get("queue", "mix"), queue.describe(), test, night.speculate);
    let seq = Sequential::new(DecisionConfig::earlier().params(None));
    let started = std::time::Instant::now();
    print!("{}", table(&seq, &night));
    eprintln!("simulated in {:.1} s", started.elapsed().as_secs_f64());
}
