//! Parse-time and peak-memory benchmark of the trace reader on a large capture (not a timed
//! test). Make a capture first (about 100 MB, not committed), then run in release mode:
//!
//!     python3 tests/helpers/make_large_capture.py target/large-capture 6200
//!     cargo run --release --example trace_parse -- target/large-capture [KERNEL_PATTERN]
//!
//! It prints the file size, the event count, the time to read the file, to decode and
//! validate every event, and to run the whole analysis, and the process's peak resident
//! memory (VmHWM). For comparison on a 107.8 MB, 1.9 M-event capture on the same 2-core
//! machine: xprof's converters took 7.3 s (hlo_stats) and 16.8 s (overview_page); a bare C++
//! protobuf parse (Python's ParseFromString) took 0.69 s.

use std::path::PathBuf;
use std::time::Instant;

use ratchet::trace::{analyze_space, locate, xplane, AnalyzeOptions};

/// Peak resident set size of this process in MiB, from /proc/self/status.
fn vm_hwm_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() -> anyhow::Result<()> {
    // Flags (such as `--bench` from a bench harness) are not ours; keep the paths.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let path = PathBuf::from(args.first().map(String::as_str).unwrap_or("target/large-capture"));
    let opts = AnalyzeOptions { kernel: Some(args.get(1).cloned().unwrap_or_else(|| "kernel".to_string())), ..Default::default() };
    let located = locate(&path)?;
    let capture = located.capture;
    let baseline = vm_hwm_mib().unwrap_or(0.0);

    let t0 = Instant::now();
    let data = std::fs::read(&capture)?;
    let t_read = t0.elapsed();
    let t1 = Instant::now();
    let space = xplane::parse(&data)?;
    let t_parse = t1.elapsed();
    let events = space.event_count();
    let t2 = Instant::now();
    let report = analyze_space(&space, &capture.display().to_string(), &opts)?;
    let t_analyze = t2.elapsed();
    let total = t0.elapsed();
    let peak = vm_hwm_mib().unwrap_or(f64::NAN);

    let mb = data.len() as f64 / 1e6;
    println!("capture:         {}", capture.display());
    println!("file size:       {mb:.1} MB ({} bytes)", data.len());
    println!("events:          {events}");
    println!("read file:       {:.3} s", t_read.as_secs_f64());
    println!(
        "decode+validate: {:.3} s ({:.0} MB/s, {:.1} M events/s)",
        t_parse.as_secs_f64(),
        mb / t_parse.as_secs_f64(),
        events as f64 / t_parse.as_secs_f64() / 1e6
    );
    println!("analyze:         {:.3} s (modules, kernel op breakdown, HLO proto, steps)", t_analyze.as_secs_f64());
    println!("total:           {:.3} s", total.as_secs_f64());
    println!("peak RSS:        {peak:.1} MiB (VmHWM; {baseline:.1} MiB before reading; file {:.1} MiB)", data.len() as f64 / 1048576.0);
    if let Some(k) = &report.kernel {
        println!("kernel:          {} x{} median {:.1} us ({})", k.name, k.executions, k.median_us, report.source);
    }
    Ok(())
}
