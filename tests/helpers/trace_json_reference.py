#!/usr/bin/env python3
"""Independent decoding of a TPU Chrome-trace export (.trace.json.gz) for tests/traces/shared_captures.rs.

Only the standard library (gzip, json): per `/device:TPU:N` process, the `XLA Modules` thread's
events are the module executions; an `XLA Ops` event belongs to the execution whose span holds
it, and is charged its `device_duration_ps` argument (as XProf does); a Pallas kernel is an op
whose HLO text (`long_name`) holds custom_call_target="tpu_custom_call", named by its short
name without the `.N` suffix. Run from the repository root:

    python3 tests/helpers/trace_json_reference.py [FILE.trace.json.gz]
"""
import gzip
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def report(path):
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    procs, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e.get("tid", 0))] = e["args"]["name"]
    print(f"== {path}\nevents={len(events)}")
    for pid, pname in sorted(procs.items(), key=lambda kv: kv[1]):
        if not pname.startswith("/device:TPU:"):
            continue
        xs = [e for e in events if e.get("ph") == "X" and e.get("pid") == pid and "ts" in e]
        mods = [e for e in xs if threads.get((pid, e.get("tid", 0))) == "XLA Modules"]
        ops = [e for e in xs if threads.get((pid, e.get("tid", 0))) == "XLA Ops"]
        # Picoseconds from microseconds, as exact as the JSON's decimals allow.
        ps = lambda us: round(us * 1e6)
        windows = sorted((ps(m["ts"]), ps(m["ts"]) + ps(m.get("dur", 0)), m["name"]) for m in mods)
        per_module = defaultdict(list)
        for s, e, n in windows:
            per_module[n].append((e - s) / 1e6)
        op_time = defaultdict(int)     # module -> summed device_duration_ps of its ops
        op_count = defaultdict(int)
        pallas = defaultdict(list)     # kernel name -> per-call device_duration (us)
        for o in ops:
            s = ps(o["ts"])
            e = s + ps(o.get("dur", 0))
            home = [w for w in windows if w[0] <= s and e <= w[1]]
            if not home:
                continue
            mod = home[-1][2]
            a = o.get("args", {})
            dd = int(a["device_duration_ps"]) if "device_duration_ps" in a else ps(o.get("dur", 0))
            op_time[mod] += dd
            op_count[mod] += 1
            if 'custom_call_target="tpu_custom_call"' in a.get("long_name", ""):
                name = re.sub(r"\.\d+$", "", o["name"])
                pallas[name].append(dd / 1e6)
        for n in sorted(per_module):
            v = per_module[n]
            print(f"  {pname} module {n}: executions={len(v)} median_us={statistics.median(v):.6f} "
                  f"ops={op_count[n]} op_device_time_us={op_time[n] / 1e6:.6f}")
        for n in sorted(pallas):
            v = pallas[n]
            print(f"  {pname} pallas {n}: calls={len(v)} median_us={statistics.median(v):.6f} "
                  f"mean_us={statistics.fmean(v):.6f} min_us={min(v):.6f} max_us={max(v):.6f} "
                  f"total_us={sum(v):.6f}")


if __name__ == "__main__":
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "fixtures")
    for p in sys.argv[1:] or [os.path.join(root, "tpu-v-vllm-json", "rpa_step.trace.json.gz")]:
        report(os.path.normpath(p))
