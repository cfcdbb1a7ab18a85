#!/usr/bin/env python3
"""The warm-up spot check's benchmark (scripts/spot-check/warmup.sh): one run's latency is
BASE_MS (base.env of the checkout) x a warm-up ramp (10% at the experiment's first run, decaying
as exp(-run/3)) x log-normal noise at CV 1%, reported through tests/support/fake_bench.py
($FAKE_BENCH) with no iteration noise."""
import math, os, random, subprocess, sys
base = 10.0
if os.path.exists("base.env"):
    for line in open("base.env"):
        if line.startswith("BASE_MS="):
            base = float(line.split("=", 1)[1])
run = int(os.environ.get("RATCHET_RUN", "0"))
rng = random.SystemRandom()
lat = base * (1 + 0.10 * math.exp(-run / 3.0)) * math.exp(0.01 * rng.gauss(0, 1))
env = dict(os.environ, FAKE_LATENCY_MS=repr(lat), FAKE_NOISE_CV="0")
sys.exit(subprocess.call([sys.executable, os.environ["FAKE_BENCH"]], env=env))
