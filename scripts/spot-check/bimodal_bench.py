#!/usr/bin/env python3
"""The bimodal spot check's benchmark (scripts/spot-check/bimodal.sh): one run's latency is
BASE_MS (base.env of the checkout) x 1.05 with probability 0.1 (a slow mode hitting one run in
ten) x log-normal noise at CV 1%, reported through tests/support/fake_bench.py ($FAKE_BENCH)
with no iteration noise."""
import math, os, random, subprocess, sys
base = 10.0
if os.path.exists("base.env"):
    for line in open("base.env"):
        if line.startswith("BASE_MS="):
            base = float(line.split("=", 1)[1])
rng = random.SystemRandom()
lat = base * (1.05 if rng.random() < 0.1 else 1.0) * math.exp(0.01 * rng.gauss(0, 1))
env = dict(os.environ, FAKE_LATENCY_MS=repr(lat), FAKE_NOISE_CV="0")
sys.exit(subprocess.call([sys.executable, os.environ["FAKE_BENCH"]], env=env))
