#!/usr/bin/env python3
"""Independent reference decoder for the .xplane.pb fixtures used by tests/traces/shared_captures.rs.

It uses the Python protobuf runtime (upb/C++), with the XSpace schema declared here by hand
from the field numbers in ../shared/xplane-format.md, so it shares no code with the Rust
reader. Run it from the repository root:

    python3 tests/helpers/xplane_reference.py            # all shared fixtures
    python3 tests/helpers/xplane_reference.py FILE.xplane.pb ...

and copy the figures it prints into the constants of tests/traces/shared_captures.rs.
"""
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def _schema():
    fdp = descriptor_pb2.FileDescriptorProto(
        name="ref_xplane.proto", package="ref", syntax="proto3")

    def msg(name, fields, nested=(), oneof=None):
        """oneof: (oneof name, field names in it), as in the real schema."""
        m = fdp.message_type.add(name=name)
        for n in nested:
            m.nested_type.add().CopyFrom(n)
        if oneof:
            m.oneof_decl.add(name=oneof[0])
        for fname, num, ftype, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=ftype, label=label)
            if tname:
                f.type_name = tname
            if oneof and fname in oneof[1]:
                f.oneof_index = 0
        return m

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED

    def map_entry(name, vtype):
        e = descriptor_pb2.DescriptorProto(name=name)
        e.options.map_entry = True
        e.field.add(name="key", number=1, type=F.TYPE_INT64, label=opt)
        e.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=opt, type_name=vtype)
        return e

    msg("XStat", [
        ("metadata_id", 1, F.TYPE_INT64, opt, None),
        ("double_value", 2, F.TYPE_DOUBLE, opt, None),
        ("uint64_value", 3, F.TYPE_UINT64, opt, None),
        ("int64_value", 4, F.TYPE_INT64, opt, None),
        ("str_value", 5, F.TYPE_STRING, opt, None),
        ("bytes_value", 6, F.TYPE_BYTES, opt, None),
        ("ref_value", 7, F.TYPE_UINT64, opt, None),
    ], oneof=("value", ("double_value", "uint64_value", "int64_value", "str_value",
                        "bytes_value", "ref_value")))
    msg("XEvent", [
        ("metadata_id", 1, F.TYPE_INT64, opt, None),
        ("offset_ps", 2, F.TYPE_INT64, opt, None),
        ("num_occurrences", 5, F.TYPE_INT64, opt, None),
        ("duration_ps", 3, F.TYPE_INT64, opt, None),
        ("stats", 4, F.TYPE_MESSAGE, rep, ".ref.XStat"),
    ], oneof=("data", ("offset_ps", "num_occurrences")))
    msg("XLine", [
        ("id", 1, F.TYPE_INT64, opt, None),
        ("display_id", 10, F.TYPE_INT64, opt, None),
        ("name", 2, F.TYPE_STRING, opt, None),
        ("display_name", 11, F.TYPE_STRING, opt, None),
        ("timestamp_ns", 3, F.TYPE_INT64, opt, None),
        ("duration_ps", 9, F.TYPE_INT64, opt, None),
        ("events", 4, F.TYPE_MESSAGE, rep, ".ref.XEvent"),
    ])
    msg("XEventMetadata", [
        ("id", 1, F.TYPE_INT64, opt, None),
        ("name", 2, F.TYPE_STRING, opt, None),
        ("display_name", 4, F.TYPE_STRING, opt, None),
        ("metadata", 3, F.TYPE_BYTES, opt, None),
        ("stats", 5, F.TYPE_MESSAGE, rep, ".ref.XStat"),
        ("child_id", 6, F.TYPE_INT64, rep, None),
    ])
    msg("XStatMetadata", [
        ("id", 1, F.TYPE_INT64, opt, None),
        ("name", 2, F.TYPE_STRING, opt, None),
        ("description", 3, F.TYPE_STRING, opt, None),
    ])
    msg("XPlane", [
        ("id", 1, F.TYPE_INT64, opt, None),
        ("name", 2, F.TYPE_STRING, opt, None),
        ("lines", 3, F.TYPE_MESSAGE, rep, ".ref.XLine"),
        ("event_metadata", 4, F.TYPE_MESSAGE, rep, ".ref.XPlane.EventMetadataEntry"),
        ("stat_metadata", 5, F.TYPE_MESSAGE, rep, ".ref.XPlane.StatMetadataEntry"),
        ("stats", 6, F.TYPE_MESSAGE, rep, ".ref.XStat"),
    ], nested=[map_entry("EventMetadataEntry", ".ref.XEventMetadata"),
               map_entry("StatMetadataEntry", ".ref.XStatMetadata")])
    msg("XSpace", [
        ("planes", 1, F.TYPE_MESSAGE, rep, ".ref.XPlane"),
        ("errors", 2, F.TYPE_STRING, rep, None),
        ("warnings", 3, F.TYPE_STRING, rep, None),
        ("hostnames", 4, F.TYPE_STRING, rep, None),
    ])
    # xla.HloProto, only the path to the opcodes.
    msg("HloInstruction", [("name", 1, F.TYPE_STRING, opt, None),
                           ("opcode", 2, F.TYPE_STRING, opt, None)])
    msg("HloComputation", [("name", 1, F.TYPE_STRING, opt, None),
                           ("instructions", 2, F.TYPE_MESSAGE, rep, ".ref.HloInstruction")])
    msg("HloModule", [("name", 1, F.TYPE_STRING, opt, None),
                      ("computations", 3, F.TYPE_MESSAGE, rep, ".ref.HloComputation")])
    msg("HloProto", [("hlo_module", 1, F.TYPE_MESSAGE, opt, ".ref.HloModule")])

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    get = lambda n: message_factory.GetMessageClass(pool.FindMessageTypeByName("ref." + n))
    return get("XSpace"), get("HloProto")


XSpace, HloProto = _schema()


def stat_value(plane, st):
    kind = st.WhichOneof("value")
    if kind is None:
        return None
    if kind == "ref_value":
        return plane.stat_metadata[st.ref_value].name
    return getattr(st, kind)


def stats_of(plane, stats):
    """name -> value; a stat given twice keeps its first value."""
    out = {}
    for st in stats:
        name = plane.stat_metadata[st.metadata_id].name
        out.setdefault(name, stat_value(plane, st))
    return out


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def print_modules(per_module):
    """Per module: the device that ran it most (ties: the first by name order of devices as
    numbered), its figures, and every device when there are several."""
    def devkey(d):
        tail = d.rsplit(":", 1)[-1]
        return (int(tail) if tail.isdigit() else -1, d)

    def primary(devs):
        return max(sorted(devs, key=devkey), key=lambda d: (len(devs[d]), -sorted(devs, key=devkey).index(d)))

    for k in sorted(per_module, key=lambda k: (-len(per_module[k][primary(per_module[k])]), k)):
        devs = per_module[k]
        d = primary(devs)
        rows = sorted(devs[d])
        spans = [r[1] for r in rows]
        ops = statistics.fmean(r[2] for r in rows)
        print(f"  module {k} on {d}: executions={len(rows)} median_us={median(spans):.6f} "
              f"mean_us={statistics.fmean(spans):.6f} min_us={min(spans):.6f} "
              f"max_us={max(spans):.6f} ops_per_execution={ops:.3f}")
        print(f"    per_execution_us={[round(x, 6) for x in spans][:12]}")
        if len(devs) > 1:
            for dd in sorted(devs, key=devkey):
                sp = [r[1] for r in devs[dd]]
                print(f"    on {dd}: executions={len(sp)} median_us={median(sp):.6f}")


def report(path):
    space = XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    n_events = sum(len(l.events) for p in space.planes for l in p.lines)
    print(f"== {path}")
    print(f"planes={len(space.planes)} lines={sum(len(p.lines) for p in space.planes)} events={n_events}")
    for p in space.planes:
        ne = sum(len(l.events) for l in p.lines)
        print(f"  plane {p.name!r} id={p.id} lines={len(p.lines)} events={ne} "
              f"event_metadata={len(p.event_metadata)}")
    # Per-execution module time: TPU `XLA Modules` events of the first TPU plane that has
    # them; else GPU kernels (with hlo_module) of the busiest GPU plane, grouped by the host
    # window (`<module>:XLA GPU module`, else `GpuExecutable::ExecuteThunks`) containing their
    # launch (matched by correlation_id); else CPU op events (with hlo_op) of the
    # tf_XLA* executor lines grouped by (hlo_module, program_id, run_id).
    def start_end(l, e):
        s = l.timestamp_ns * 1000 + e.offset_ps
        return s, s + e.duration_ps

    def devno(p, prefix):
        return int(p.name[len(prefix):]) if p.name.startswith(prefix) and p.name[len(prefix):].isdigit() else None

    # Executions are keyed per device: (device, module) -> exec key -> intervals.
    groups = defaultdict(list)  # (device, module display name, exec key) -> [(start, end)]
    source = None
    tpus = sorted((p for p in space.planes if devno(p, "/device:TPU:") is not None),
                  key=lambda p: devno(p, "/device:TPU:"))
    for p in tpus:
        windows = []
        for l in p.lines:
            if l.name != "XLA Modules":
                continue
            for n, e in enumerate(l.events):
                groups[(p.name, p.event_metadata[e.metadata_id].name, n)].append(start_end(l, e))
                windows.append(start_end(l, e) + (p.event_metadata[e.metadata_id].name,))
                source = "XLA Modules"
        # XLA Ops: each op is charged its `device_duration_ps` stat (the event's duration when
        # absent) and belongs to the module execution whose span holds it.
        op_time, n_dd, n_ev = defaultdict(int), 0, 0
        for l in p.lines:
            if l.name != "XLA Ops":
                continue
            for e in l.events:
                s0, s1 = start_end(l, e)
                home = [w for w in windows if w[0] <= s0 and s1 <= w[1]]
                if not home:
                    continue
                st = stats_of(p, e.stats)
                if "device_duration_ps" in st:
                    n_dd += 1
                    op_time[home[-1][2]] += st["device_duration_ps"]
                else:
                    n_ev += 1
                    op_time[home[-1][2]] += e.duration_ps
        for mod in sorted(op_time):
            print(f"  {p.name} ops of {mod}: device_time_us={op_time[mod] / 1e6:.6f} "
                  f"(device_duration_ps on {n_dd} op events, event duration on {n_ev})")
    if source is None:
        # GPU: every kernel (with hlo_module) of every GPU plane. Its execution is the
        # innermost `XLA GPU module` window (else `GpuExecutable::ExecuteThunks`) of the host
        # thread (line) that launched it, found by correlation_id; when that thread has no
        # window holding the launch, the window of the one thread that holds it (latest start
        # when several do).
        launch, windows = {}, defaultdict(lambda: ([], []))
        for h in space.planes:
            if not h.name.startswith("/host:"):
                continue
            for li, l in enumerate(h.lines):
                key = (h.name, li)
                for e in l.events:
                    name = h.event_metadata[e.metadata_id].name
                    se = start_end(l, e)
                    if name.endswith(":XLA GPU module"):
                        windows[key][0].append(se)
                    elif re.fullmatch(r"(\[\d+\] )?GpuExecutable::ExecuteThunks", name):
                        windows[key][1].append(se)
                    c = stats_of(h, e.stats).get("correlation_id")
                    if c is not None:
                        launch.setdefault(c, (key, se[0]))
        per_thread = {k: sorted(m or t, key=lambda w: (w[0], -w[1])) for k, (m, t) in windows.items()}

        def innermost(ws, t):
            best = None
            for i, w in enumerate(ws):
                if w[0] <= t <= w[1]:
                    best = i  # sorted by start: the last hit starts latest
            return best

        orphan = 0
        for p in space.planes:
            if devno(p, "/device:GPU:") is None:
                continue
            for l in p.lines:
                if not l.name.startswith("Stream #"):
                    continue
                for e in l.events:
                    s = stats_of(p, e.stats)
                    if "hlo_module" not in s:
                        continue
                    exec_key = None
                    lt = launch.get(s.get("correlation_id"))
                    if lt is not None:
                        thread, t = lt
                        i = innermost(per_thread.get(thread, []), t)
                        if i is not None:
                            exec_key = (thread, i)
                        else:
                            hits = [(per_thread[th][j][0], th, j) for th in per_thread
                                    for j in [innermost(per_thread[th], t)] if j is not None]
                            if hits:
                                _, th, j = max(hits)
                                exec_key = (th, j)
                    if exec_key is None:
                        orphan -= 1
                        exec_key = orphan
                    name = f"{s['hlo_module']}({s['program_id']})" if "program_id" in s else s["hlo_module"]
                    groups[(p.name, name, exec_key)].append(start_end(l, e))
                    source = "Stream"
    if source is None:
        # CPU: op events (hlo_op and hlo_module, no correlation_id, which marks a GPU launch)
        # of every host line, the caller's own thread included. Without a run_id an event
        # belongs to the latest host dispatch (outermost `...Executable::Execute` or
        # `...Executable::ExecuteHelper` event of its line) that started at or before it; with
        # no dispatch, to the latest kernel_step annotation.
        dispatch_re = re.compile(r".*Executable::Execute(Helper)?")
        step_re = re.compile(r"kernel_step(_\d+)?")
        dispatches, step_starts, unnumbered = [], [], []
        for p in space.planes:
            if not p.name.startswith("/host:"):
                continue
            for l in p.lines:
                outer_end = None
                for e in sorted(l.events, key=lambda e: (start_end(l, e)[0], -e.duration_ps)):
                    name = p.event_metadata[e.metadata_id].name
                    s0, s1 = start_end(l, e)
                    if dispatch_re.fullmatch(name) and (outer_end is None or s0 >= outer_end):
                        dispatches.append(s0)
                        outer_end = s1
                    if step_re.fullmatch(name):
                        step_starts.append(s0)
                    s = stats_of(p, e.stats)
                    if "hlo_op" not in s or "hlo_module" not in s or "correlation_id" in s:
                        continue
                    name = f"{s['hlo_module']}({s['program_id']})" if "program_id" in s else s["hlo_module"]
                    if "run_id" in s:
                        groups[("host", name, ("run", s["run_id"]))].append((s0, s1))
                    else:
                        unnumbered.append((name, s0, s1))
                    source = f"{p.name} / host lines"
        bounds = sorted(dispatches) or sorted(step_starts)
        for name, s0, s1 in unnumbered:
            n = sum(1 for b in bounds if b <= s0)
            groups[("host", name, ("split", n))].append((s0, s1))
    print(f"  source: {source}")
    per_module = defaultdict(lambda: defaultdict(list))  # module -> device -> [(start, span, ops)]
    for (dev, mod, key), iv in groups.items():
        span = (max(e for _, e in iv) - min(s for s, _ in iv)) / 1e6
        per_module[mod][dev].append((min(s for s, _ in iv), span, len(iv)))
    print_modules(per_module)
    # Host-side kernel_step annotations.
    steps = []
    for p in space.planes:
        if p.name.startswith("/host:"):
            for l in p.lines:
                for e in l.events:
                    if re.fullmatch(r"kernel_step(_\d+)?", p.event_metadata[e.metadata_id].name):
                        steps.append((start_end(l, e)[0], e.duration_ps / 1e6))
    if steps:
        print(f"  kernel_step_us={[round(d, 3) for _, d in sorted(steps)]}")
    # HLO opcodes from /host:metadata.
    for p in space.planes:
        if p.name != "/host:metadata":
            continue
        for k, md in sorted(p.event_metadata.items()):
            for st in md.stats:
                if p.stat_metadata[st.metadata_id].name == "Hlo Proto":
                    h = HloProto()
                    h.ParseFromString(st.bytes_value)
                    counts = defaultdict(int)
                    total = 0
                    for c in h.hlo_module.computations:
                        for i in c.instructions:
                            counts[i.opcode] += 1
                            total += 1
                    keep = {o: counts.get(o, 0) for o in
                            ("dot", "exponential", "reduce", "copy", "fusion", "custom-call", "while")}
                    print(f"  hlo_proto {md.name!r}: total={total} {keep}")


if __name__ == "__main__":
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "fixtures")
    paths = sys.argv[1:] or [
        os.path.join(root, "jax-cpu-0.10.2", "flash_attention_5iters.xplane.pb"),
        os.path.join(root, "tpu-v6e-xprof", "tpu_inference_2.xplane.pb"),
        os.path.join(root, "amd-mi300x-jax0.8", "attention.xplane.pb"),
    ] + sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "captures", "*",
                                      "steps.xplane.pb")))
    for p in paths:
        report(os.path.normpath(p))
