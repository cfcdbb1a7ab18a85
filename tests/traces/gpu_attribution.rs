//! GPU kernels attributed to their module executions, per device, on every launch/window layout
//! a capture can have: synthetic captures written as real `.xplane.pb` bytes by
//! tests/support/xspace.rs and read by the parser as any capture is.
//!
//! Each layout runs `EXECS` executions of one module on every GPU; an execution launches
//! `KERNELS` kernels whose device times are known, so its span (first kernel start to last
//! kernel end) is known exactly: every device must show `EXECS` executions of that span.

use crate::support::xspace;

use ratchet::trace::{analyze_space, xplane, AnalyzeOptions, TraceReport};
use xspace::{r, s, Plane, V};

const EXECS: i64 = 5;
const KERNELS: i64 = 4;
/// Between two executions of one device (ps).
const PERIOD: i64 = 10_000_000;
/// Host window of one execution (ps).
const WINDOW: i64 = 3_000_000;
/// A kernel's device time and the step between kernel starts (ps).
const KERNEL_DUR: i64 = 200_000;
const KERNEL_STEP: i64 = 300_000;
/// One execution's span on its GPU: (KERNELS - 1) steps and one kernel.
const SPAN_US: f64 = ((KERNELS - 1) * KERNEL_STEP + KERNEL_DUR) as f64 / 1e6;

/// Where a layout puts the host side of device `d`'s execution `e`.
struct Layout {
    gpus: u32,
    /// Thread holding the module windows of device d.
    window_thread: fn(u32) -> String,
    /// Thread holding the launch API events of device d.
    launch_thread: fn(u32) -> String,
    /// Start of device d's execution e (ps).
    start: fn(u32, i64) -> i64,
    /// Whether kernel k of execution e on device d has its correlation id.
    correlated: fn(u32, i64, i64) -> bool,
}

/// The names the host events go by in a capture.
struct Names {
    /// Device d's execution window.
    window: fn(u32) -> String,
    /// The launch of kernel k (an API call on AMD and older CUDA captures, the kernel's own name
    /// on jax 0.11's CUDA captures).
    launch: fn(i64) -> String,
}

/// ROCm (the MI300X captures): `<module>:XLA GPU module` windows, `hipLaunchKernel` launches.
const MODULE_WINDOWS: Names = Names { window: |_| "jit_f:XLA GPU module".into(), launch: |_| "hipLaunchKernel".into() };

/// jax 0.11.2 on an H200 (tests/fixtures/example-gpu): no module window, the thunk executor's
/// window prefixed with the device ordinal (`[0] GpuExecutable::ExecuteThunks`), launches named
/// after the kernel.
const ORDINAL_THUNK_WINDOWS: Names = Names { window: |d| format!("[{d}] GpuExecutable::ExecuteThunks"), launch: |k| format!("kernel_{k}") };

fn build(l: &Layout) -> Vec<u8> {
    build_named(l, &MODULE_WINDOWS)
}

fn build_named(l: &Layout, names: &Names) -> Vec<u8> {
    let mut host = Plane::new("/host:CPU");
    let mut gpus: Vec<Plane> = (0..l.gpus).map(|d| Plane::new(&format!("/device:GPU:{d}"))).collect();
    let mut corr = 0i64;
    // Host events must be in time order per line: collect, sort, then write.
    // (line, start, name, duration, stats)
    type HostEvent<'a> = (String, i64, String, i64, Vec<(&'a str, V)>);
    let mut host_events: Vec<HostEvent<'_>> = Vec::new();
    for d in 0..l.gpus {
        for e in 0..EXECS {
            let t0 = (l.start)(d, e);
            host_events.push(((l.window_thread)(d), t0, (names.window)(d), WINDOW, vec![]));
            for k in 0..KERNELS {
                corr += 1;
                let launch = t0 + 100_000 + k * 50_000;
                host_events.push((
                    (l.launch_thread)(d),
                    launch,
                    (names.launch)(k),
                    10_000,
                    vec![("correlation_id", V::I(corr)), ("device_id", V::I(i64::from(d)))],
                ));
                let mut stats = vec![("hlo_module", r("jit_f")), ("program_id", V::I(7)), ("hlo_op", r(&format!("fusion.{k}")))];
                if (l.correlated)(d, e, k) {
                    stats.push(("correlation_id", V::I(corr)));
                }
                // Device time runs behind the launches, well inside or past the host window.
                let start = t0 + 1_000_000 + k * KERNEL_STEP;
                gpus[d as usize].event("Stream #1(Kernel)", &format!("kernel_{k}"), start, KERNEL_DUR, &stats);
            }
        }
    }
    host_events.sort_by_key(|e| (e.1, std::cmp::Reverse(e.3)));
    for (line, start, name, dur, stats) in host_events {
        host.event(&line, &name, start, dur, &stats);
    }
    let mut planes = vec![host];
    planes.extend(gpus);
    xspace::space(planes)
}

fn read(data: &[u8]) -> TraceReport {
    let sp = xplane::parse_skeleton(data).unwrap();
    analyze_space(&sp, "synthetic", &AnalyzeOptions::default()).unwrap()
}

/// Every GPU shows `EXECS` executions of `SPAN_US` each.
fn assert_per_device(r: &TraceReport, gpus: u32) {
    let m = r.modules.iter().find(|m| m.name == "jit_f(7)").expect("module read");
    let per: Vec<(String, usize, f64)> = if m.devices.is_empty() {
        vec![(m.device.clone().unwrap(), m.executions, m.median_us)]
    } else {
        m.devices.iter().map(|d| (d.device.clone(), d.executions, d.median_us)).collect()
    };
    assert_eq!(per.len(), gpus as usize, "{per:?}");
    for (dev, n, median) in &per {
        assert_eq!(*n, EXECS as usize, "{dev}: executions, {per:?}; warnings {:?}", r.warnings);
        assert!((median - SPAN_US).abs() < 1e-9, "{dev}: median {median} us, expected {SPAN_US}; {per:?}");
    }
    let k = r.kernel.as_ref().unwrap();
    assert_eq!(k.executions, EXECS as usize);
    assert!((k.median_us - SPAN_US).abs() < 1e-9, "kernel median {}", k.median_us);
}

fn per_gpu_thread(d: u32) -> String {
    format!("py_xla_execute/{}", 1000 + d)
}
fn per_gpu_launcher(d: u32) -> String {
    format!("Host Threads/{}", 2000 + d)
}
fn one_launcher(_: u32) -> String {
    "Host Threads/2000".into()
}
fn one_thread(_: u32) -> String {
    "py_xla_execute/1000".into()
}
/// All GPUs start together, each 0.2 ms after the previous: their windows overlap.
fn concurrent(d: u32, e: i64) -> i64 {
    1_000_000 + e * PERIOD + i64::from(d) * 200_000
}
/// Exactly together: every thread's windows hold every device's launches.
fn simultaneous(_: u32, e: i64) -> i64 {
    1_000_000 + e * PERIOD
}
/// One device after the other, never overlapping.
fn sequential(d: u32, e: i64) -> i64 {
    1_000_000 + e * PERIOD * 8 + i64::from(d) * PERIOD
}
fn all(_: u32, _: i64, _: i64) -> bool {
    true
}

#[test]
fn ordinal_prefixed_thunk_windows_one_gpu() {
    let l = Layout { gpus: 1, window_thread: per_gpu_thread, launch_thread: per_gpu_thread, start: concurrent, correlated: all };
    let r = read(&build_named(&l, &ORDINAL_THUNK_WINDOWS));
    assert!(r.warnings.is_empty(), "every kernel is tied to its window: {:?}", r.warnings);
    assert_per_device(&r, 1);
}

#[test]
fn ordinal_prefixed_thunk_windows_concurrent_gpus() {
    for launch in [per_gpu_thread as fn(u32) -> String, per_gpu_launcher, one_launcher] {
        let l = Layout { gpus: 8, window_thread: per_gpu_thread, launch_thread: launch, start: concurrent, correlated: all };
        let r = read(&build_named(&l, &ORDINAL_THUNK_WINDOWS));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_per_device(&r, 8);
    }
}

#[test]
fn launches_on_their_window_threads_concurrent_gpus() {
    let l = Layout { gpus: 8, window_thread: per_gpu_thread, launch_thread: per_gpu_thread, start: concurrent, correlated: all };
    assert_per_device(&read(&build(&l)), 8);
}

#[test]
fn launches_on_threads_without_windows_concurrent_gpus() {
    // The MI300X layout that went wrong: each GPU's launches on a host thread of their own,
    // each GPU's windows on its own concurrently running thread.
    let l = Layout { gpus: 8, window_thread: per_gpu_thread, launch_thread: per_gpu_launcher, start: concurrent, correlated: all };
    let r = read(&build(&l));
    assert_per_device(&r, 8);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn launches_on_one_shared_thread_concurrent_gpus() {
    let l = Layout { gpus: 4, window_thread: per_gpu_thread, launch_thread: one_launcher, start: concurrent, correlated: all };
    assert_per_device(&read(&build(&l)), 4);
}

#[test]
fn simultaneous_windows_on_every_thread() {
    for launch in [per_gpu_launcher as fn(u32) -> String, one_launcher, per_gpu_thread] {
        let l = Layout { gpus: 4, window_thread: per_gpu_thread, launch_thread: launch, start: simultaneous, correlated: all };
        assert_per_device(&read(&build(&l)), 4);
    }
}

#[test]
fn one_thread_drives_many_gpus() {
    for launch in [one_thread as fn(u32) -> String, per_gpu_launcher, one_launcher] {
        let l = Layout { gpus: 4, window_thread: one_thread, launch_thread: launch, start: sequential, correlated: all };
        assert_per_device(&read(&build(&l)), 4);
    }
}

#[test]
fn interleaved_sequential_gpus_on_their_own_threads() {
    for launch in [per_gpu_thread as fn(u32) -> String, per_gpu_launcher, one_launcher] {
        let l = Layout { gpus: 3, window_thread: per_gpu_thread, launch_thread: launch, start: sequential, correlated: all };
        assert_per_device(&read(&build(&l)), 3);
    }
}

#[test]
fn kernels_without_correlation_ids_join_the_execution_around_them() {
    // The middle kernels of every execution lost their correlation id: the first and last
    // kernels still place the execution on the device's timeline.
    fn middle_missing(_: u32, _: i64, k: i64) -> bool {
        k == 0 || k == KERNELS - 1
    }
    for launch in [per_gpu_thread as fn(u32) -> String, per_gpu_launcher] {
        let l = Layout { gpus: 4, window_thread: per_gpu_thread, launch_thread: launch, start: concurrent, correlated: middle_missing };
        let r = read(&build(&l));
        assert_per_device(&r, 4);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }
}

#[test]
fn a_kernel_no_execution_surrounds_counts_alone_with_a_warning() {
    // The last kernel of device 0's first execution has no correlation id: nothing places it.
    fn last_missing(d: u32, e: i64, k: i64) -> bool {
        !(d == 0 && e == 0 && k == KERNELS - 1)
    }
    let l = Layout { gpus: 2, window_thread: per_gpu_thread, launch_thread: per_gpu_launcher, start: concurrent, correlated: last_missing };
    let r = read(&build(&l));
    let m = &r.modules[0];
    assert_eq!(m.devices.iter().map(|d| d.executions).collect::<Vec<_>>(), vec![EXECS as usize + 1, EXECS as usize]);
    assert!(r.warnings.iter().any(|w| w.contains("1 GPU kernel(s) could not be tied")), "{:?}", r.warnings);
}

#[test]
fn builder_writes_what_the_parser_reads() {
    // The builder itself: one plane, one line, stats of every kind.
    let mut p = Plane::new("/host:CPU");
    p.event("t", "ev", 5, 7, &[("a", V::I(-3)), ("b", V::U(u64::MAX)), ("c", V::F(2.5)), ("d", s("x")), ("e", r("y"))]);
    let data = xspace::space(vec![p]);
    let sp = xplane::parse(&data).unwrap();
    let plane = &sp.planes[0];
    let ev = plane.lines[0].events().next().unwrap();
    assert_eq!((plane.event_name(ev.metadata_id), ev.offset_ps, ev.duration_ps), ("ev", 5, 7));
    let vals: Vec<String> = ev.stats().map(|st| format!("{:?}", st.value)).collect();
    assert_eq!(vals.len(), 5, "{vals:?}");
    assert_eq!(plane.stat_str(&ev.stats().nth(4).unwrap().value), Some("y"));
}
