#!/usr/bin/env python3
"""A fake benchmark for ratchet's integration tests: it follows the benchmark protocol without a
kernel. Its behaviour comes from environment variables, overridden per commit by a `fake.env`
file (KEY=VALUE lines) in the checkout it runs in, so a hypothesis can change it.

FAKE_LATENCY_MS   median latency to report (default 10)
FAKE_NOISE_CV     relative noise of each iteration (default 0.01), seeded by FAKE_SEED + RATCHET_RUN
FAKE_MODE         result | legacy | crash | hang | garbage | silent | badcheck | badversion
FAKE_SPAWN_CHILD  1: start a sleeping grandchild first and write its pid to $FAKE_PID_FILE
FAKE_FLOPS        FLOPs to report (default 1e9); FAKE_BYTES likewise (default 1e7)
FAKE_SLEEP_S      seconds to sleep before reporting (default 0)
FAKE_WRITE_DIR    a directory (relative to the checkout) to write a file into, as benchmarks
                  that dump ./profile_data do
FAKE_HLO          text to dump as the run's compiled HLO (kernel.hlo.txt, named in "hlo")
FAKE_LATER_LATENCY_MS, FAKE_LATER_FROM_RUN
                  from run index FAKE_LATER_FROM_RUN on, report FAKE_LATER_LATENCY_MS instead
FAKE_THROTTLED    1: mark every run as throttled
FAKE_META         JSON object reported as the run's `meta` (default {"fake": true})
FAKE_ENV          JSON object reported as the run's `environment`
FAKE_KERNEL_BODY  path of a kernel-body file to copy into RATCHET_OUT as kernel.body.mlir
FAKE_PHASES       1: report `phases_s` (timed from RATCHET_SPAWN_NS, as ratchet_bench does) and
                  `kernel_calls` (the measured iterations)
FAKE_STDERR       with FAKE_MODE=crash: what to print on stderr instead of the traceback, with
                  Python's backslash escapes (\\x1b, \\n) read as the bytes they name
"""
import time

STARTED_NS = time.monotonic_ns()

import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402


def settings():
    cfg = {k: v for k, v in os.environ.items() if k.startswith("FAKE_")}
    if os.path.exists("fake.env"):
        with open("fake.env") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, v = line.split("=", 1)
                    cfg[k.strip()] = v.strip()
    return cfg


def main():
    cfg = settings()
    mode = cfg.get("FAKE_MODE", "result")
    out = os.environ.get("RATCHET_OUT", ".")
    run = int(os.environ.get("RATCHET_RUN", "0"))
    iters = int(os.environ.get("RATCHET_ITERS", "10"))
    rng = random.Random(int(cfg.get("FAKE_SEED", "1")) * 1000 + run)
    if cfg.get("FAKE_SPAWN_CHILD") == "1":
        child = subprocess.Popen(["sleep", "300"])
        with open(cfg["FAKE_PID_FILE"], "w") as f:
            f.write(str(child.pid))
    time.sleep(float(cfg.get("FAKE_SLEEP_S", "0")))
    if cfg.get("FAKE_WRITE_DIR"):
        os.makedirs(cfg["FAKE_WRITE_DIR"], exist_ok=True)
        with open(os.path.join(cfg["FAKE_WRITE_DIR"], f"run{run}.txt"), "w") as f:
            f.write("benchmark output\n")
    print(f"fake benchmark: mode={mode} side={os.environ.get('RATCHET_SIDE')} run={run}")
    if mode == "crash":
        text = "Traceback (most recent call last):\nRuntimeError: fake kernel exploded"
        if "FAKE_STDERR" in cfg:
            text = cfg["FAKE_STDERR"].encode().decode("unicode_escape")
        print(text, file=sys.stderr)
        sys.exit(3)
    if mode == "hang":
        while True:
            time.sleep(1)
    lat = float(cfg.get("FAKE_LATENCY_MS", "10"))
    if "FAKE_LATER_FROM_RUN" in cfg and run >= int(cfg["FAKE_LATER_FROM_RUN"]):
        lat = float(cfg["FAKE_LATER_LATENCY_MS"])
    cv = float(cfg.get("FAKE_NOISE_CV", "0.01"))
    lats = [lat * max(0.05, 1 + rng.gauss(0, cv)) for _ in range(iters)]
    flops = float(cfg.get("FAKE_FLOPS", "1e9"))
    if mode == "legacy":
        med = sorted(lats)[len(lats) // 2]
        tflops = flops / (med / 1e3) / 1e12
        util = tflops / 197 * 100
        print(f"RESULT: score={util / med:.4f}  latency={med:.4f}ms  util={util:.2f}%  tflops={tflops:.4f}")
        print("REGIME: COMPUTE-BOUND  BW=38.2%  intensity=682 FLOPs/byte")
        return
    if mode == "silent":
        return
    path = os.path.join(out, "ratchet-result.json")
    if mode == "garbage":
        with open(path, "w") as f:
            f.write('{"version": 1, "latencies_ms": [1.0, ')
        return
    result = {
        "version": 2 if mode == "badversion" else 1,
        "latencies_ms": lats,
        "flops": flops,
        "bytes": float(cfg.get("FAKE_BYTES", "1e7")),
        "check": {"passed": mode != "badcheck", "max_abs_err": 0.5 if mode == "badcheck" else 1e-6, "tolerance": 1e-3},
        "meta": json.loads(cfg["FAKE_META"]) if "FAKE_META" in cfg else {"fake": True},
    }
    if "FAKE_ENV" in cfg:
        result["environment"] = json.loads(cfg["FAKE_ENV"])
    if "FAKE_KERNEL_BODY" in cfg:
        with open(cfg["FAKE_KERNEL_BODY"]) as src, open(os.path.join(out, "kernel.body.mlir"), "w") as dst:
            dst.write(src.read())
        result["kernel_body"] = "kernel.body.mlir"
    if "FAKE_HLO" in cfg:
        with open(os.path.join(out, "kernel.hlo.txt"), "w") as f:
            f.write(cfg["FAKE_HLO"])
        result["hlo"] = "kernel.hlo.txt"
    if cfg.get("FAKE_THROTTLED") == "1":
        result["throttled"] = True
    if cfg.get("FAKE_PHASES") == "1":
        now = time.monotonic_ns()
        spawn = int(os.environ.get("RATCHET_SPAWN_NS", STARTED_NS))
        result["phases_s"] = {"start_to_import": (STARTED_NS - spawn) / 1e9,
                              "measured": (now - STARTED_NS) / 1e9}
        result["kernel_calls"] = iters
    with open(path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
