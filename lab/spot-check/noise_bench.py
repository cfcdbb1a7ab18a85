#!/usr/bin/env python3
"""The spot checks' benchmark of controlled noise (lab/spot-check/models.sh): one run's
latency is BASE_MS (base.env of the checkout) x the machine of SPOT_MODEL, reported through
tests/support/fake_bench.py ($FAKE_BENCH, loaded in this process) with no
iteration noise. The models are those of
`ratchet-lab simulate` (lab/src/simulate.rs) of the same name, on a real sequence of runs:

  cv1        log-normal noise, CV 1%
  cv3        log-normal noise, CV 3% (calibration and experiments alike)
  warmup     cv1 x a warm-up ramp: 10% at each experiment's first run, decaying as exp(-run/3)
  warmup4x, warmup6x
             warmup, its noise 4x / 6x the calibration's in experiments (the ramp in both)
  bimodal    cv1 x 1.05 one run in ten
  ar05, ar08 AR(1) noise, coefficient 0.5 / 0.8, CV 1% (its state kept in $SPOT_STATE)
  t3         Student t(3) noise scaled to sd 1%
  jump15, jump3, jump10
             CV 1% while calibrating, 1.5x / 3x / 10x that in experiments
  t3jump3    t3 tails, 3x in experiments
  boundary3  3x from the experiment's confirmation on (ratchet's RATCHET_PHASE), from its
             first run
  rising     CV 1% at each experiment's first run, growing by 5% of that per run
  trend      cv1 x a throttling trend: 0.3% slower per run of the experiment
  period7    cv1, every 7th process on the machine 15% slower (a counter in $SPOT_STATE.period,
             its phase drawn at the first run)
  throttle7  the same, 8% slower (5.6 pair sds: a second mode rather than an outlier)
  rare       cv1, 1% of runs 2-5x slower (uniform)
  cand2x     cv1, the candidate's runs twice as noisy as the incumbent's (the calibration's
             runs as the incumbent's)
  cand3x     the same, three times as noisy

SPOT_STAGE=calibrate marks the calibration's runs (the history's noise)."""
import importlib.util, math, os, random, sys

JUMPS = {"jump15": 1.5, "jump3": 3.0, "jump10": 10.0, "t3jump3": 3.0, "warmup4x": 4.0, "warmup6x": 6.0}
MODELS = {"cv1", "cv3", "warmup", "bimodal", "ar05", "ar08", "t3", "rising", "trend", "boundary3", "period7", "throttle7", "rare", "cand2x", "cand3x"}
MODELS |= set(JUMPS)
model = os.environ.get("SPOT_MODEL", "cv1")
if model not in MODELS:
    sys.exit("noise_bench.py: unknown SPOT_MODEL " + model)
base = 10.0
if os.path.exists("base.env"):
    for line in open("base.env"):
        if line.startswith("BASE_MS="):
            base = float(line.split("=", 1)[1])
run = int(os.environ.get("RATCHET_RUN", "0"))
calibrating = os.environ.get("SPOT_STAGE") == "calibrate"
rng = random.SystemRandom()


def t3():
    # Student t with 3 df, scaled to unit variance (its variance is 3).
    chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(3))
    return rng.gauss(0, 1) / math.sqrt(chi2 / 3) / math.sqrt(3)


def in_confirmation():
    # ratchet tells each run its phase, so the jump starts exactly at the boundary.
    return os.environ.get("RATCHET_PHASE") == "confirmation"


cv, factor = (0.03 if model == "cv3" else 0.01), 1.0
if not calibrating:
    cv *= JUMPS.get(model, 1.0)
    if model == "boundary3" and in_confirmation():
        cv *= 3.0
    if model == "rising":
        cv *= 1 + 0.05 * run
if model in ("t3", "t3jump3"):
    z = t3()
elif model in ("ar05", "ar08"):
    rho = 0.5 if model == "ar05" else 0.8
    state = os.environ["SPOT_STATE"]
    if os.path.exists(state):
        z = rho * float(open(state).read()) + math.sqrt(1 - rho * rho) * rng.gauss(0, 1)
    else:
        z = rng.gauss(0, 1)  # stationary from the first run
    with open(state, "w") as f:
        f.write(repr(z))
else:
    z = rng.gauss(0, 1)
if model == "trend":
    # As in the simulator, the calibration's runs drift too (their pairs cancel it).
    factor *= 1 + 0.003 * run
if model.startswith("warmup"):
    factor *= 1 + 0.10 * math.exp(-run / 3.0)
if model == "bimodal" and rng.random() < 0.1:
    factor *= 1.05
if model in ("period7", "throttle7"):
    # The machine's process count, so the period runs on across the calibration and the
    # experiments, whichever side or phase.
    counter = os.environ["SPOT_STATE"] + ".period"
    n = int(open(counter).read()) if os.path.exists(counter) else rng.randrange(7)
    with open(counter, "w") as f:
        f.write(str(n + 1))
    if n % 7 == 0:
        factor *= 1.15 if model == "period7" else 1.08
if model == "rare" and rng.random() < 0.01:
    factor *= rng.uniform(2.0, 5.0)
if model in ("cand2x", "cand3x") and not calibrating and os.environ.get("RATCHET_SIDE") == "candidate":
    z *= 2.0 if model == "cand2x" else 3.0
lat = base * factor * math.exp(cv * z)
os.environ.update(FAKE_LATENCY_MS=repr(lat), FAKE_NOISE_CV="0")
# fake_bench.py in this process: a second interpreter would double each run's cost.
spec = importlib.util.spec_from_file_location("fake_bench", os.environ["FAKE_BENCH"])
fake = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake)
fake.main()
