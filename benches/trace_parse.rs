//! Speed and peak-memory benchmark of the trace reader on a large capture (not a timed test).
//! Make a capture first (about 100 MB, not committed), then run in release mode:
//!
//!     python3 tests/helpers/make_large_capture.py target/large-capture 6200
//!     cargo bench --bench trace_parse -- target/large-capture [KERNEL_PATTERN]
//!
//! In one run, pinned to one core, it times reading the file (`cat > /dev/null`: 1 MiB
//! chunks into one buffer), the per-run times-only analysis and the whole analysis
//! (per-execution kernel times and the op breakdown), and prints the process's peak resident
//! memory (VmHWM, mapped file pages included) against the file size. Each figure is the
//! median of the runs, with the fastest beside it.

#[path = "common/mod.rs"]
mod common;

use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ratchet::trace::{analyze, locate, AnalyzeOptions, TraceReport};

/// Peak resident set size of this process in bytes, from /proc/self/status.
fn vm_hwm() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Runs on CPU 0 only, so the figures are one core's.
fn pin_to_one_core() -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity only
    // read and write that local set and this thread's affinity.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn read_like_cat(path: &std::path::Path) -> anyhow::Result<u64> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            return Ok(n);
        }
        n += k as u64;
    }
}

/// CPU time this thread has used: on a machine shared with other work, the wall-clock time
/// of one run includes waiting for the core, the CPU time does not.
fn thread_cpu() -> Duration {
    // SAFETY: clock_gettime writes the zeroed timespec it is given.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Timings of `runs` calls of `f`: median and best wall-clock time, median CPU time; and the
/// last result.
struct Timed<T> {
    median: Duration,
    best: Duration,
    cpu: Duration,
    last: T,
}

fn time<T>(runs: usize, mut f: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<Timed<T>> {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs {
        let (t, c) = (Instant::now(), thread_cpu());
        let out = f()?;
        wall.push(t.elapsed());
        cpu.push(thread_cpu().saturating_sub(c));
        last = Some(out);
    }
    wall.sort();
    cpu.sort();
    Ok(Timed { median: wall[wall.len() / 2], best: wall[0], cpu: cpu[cpu.len() / 2], last: last.expect("runs > 0") })
}

fn main() -> anyhow::Result<()> {
    let Some(args) = common::bench_args("trace_parse") else { return Ok(()) };
    let path = PathBuf::from(args.first().map(String::as_str).unwrap_or("target/large-capture"));
    let kernel = Some(args.get(1).cloned().unwrap_or_else(|| "kernel".to_string()));
    let pinned = pin_to_one_core();
    let capture = locate(&path)?.capture;
    let size = std::fs::metadata(&capture)?.len();
    let runs = 5;

    // Warm the page cache once, so every figure below reads from memory alike.
    read_like_cat(&capture)?;
    let cat = time(runs, || read_like_cat(&capture))?;
    let times_only = AnalyzeOptions { kernel: kernel.clone(), times_only: true };
    // One untimed run first: the first mapping of the file pays for setting up its pages.
    analyze(&capture, &times_only)?;
    let t = time(runs, || analyze(&capture, &times_only))?;
    let full = AnalyzeOptions { kernel, times_only: false };
    let f = time(runs, || analyze(&capture, &full))?;
    let report: TraceReport = f.last;
    let peak = vm_hwm().unwrap_or(0);

    let mb = size as f64 / 1e6;
    let s = |d: Duration| d.as_secs_f64();
    println!("capture:           {}", capture.display());
    println!("file size:         {mb:.1} MB ({size} bytes), {} events", report.events);
    println!("one core:          {}", if pinned { "pinned to CPU 0" } else { "NOT pinned (sched_setaffinity failed)" });
    println!("                   wall median / wall best / CPU median, over {runs} runs");
    println!("read (cat):        {:.3} s / {:.3} s / {:.3} s ({:.0} MB/s)", s(cat.median), s(cat.best), s(cat.cpu), mb / s(cat.median));
    println!(
        "times only:        {:.3} s / {:.3} s / {:.3} s ({:.1}x the read; per-execution kernel times)",
        s(t.median),
        s(t.best),
        s(t.cpu),
        s(t.median) / s(cat.median)
    );
    println!(
        "whole analysis:    {:.3} s / {:.3} s / {:.3} s ({:.1}x the read; {:.1} M events/s; kernel times + op breakdown)",
        s(f.median),
        s(f.best),
        s(f.cpu),
        s(f.median) / s(cat.median),
        report.events as f64 / s(f.median) / 1e6
    );
    println!("peak RSS:          {:.1} MiB (VmHWM) = {:.2}x the file", peak as f64 / 1048576.0, peak as f64 / size as f64);
    if let Some(k) = &report.kernel {
        println!(
            "kernel:            {} x{} median {:.1} us, {} ops in the breakdown ({})",
            k.name,
            k.executions,
            k.median_us,
            k.op_breakdown.len(),
            report.source
        );
    }
    Ok(())
}
