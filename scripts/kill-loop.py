#!/usr/bin/env python3
"""The random-kill loop of docs/crash-safety.md: SIGKILL ratchet (or its benchmark's process
group) at a random moment of an experiment, of the rollback that follows a revert, or of the
`ratchet recover` that finishes it, start it again, and check that nothing was lost.

Each iteration makes one user edit (a slower or faster fake benchmark, and a rewrite of a 16 MB
tracked file, so a rollback has bytes to write), runs `ratchet "..."` and kills it after a random
delay; half the time the next `ratchet recover` is killed too, after its own random delay; then
a last `ratchet recover` runs to the end. Checked after each iteration:
  - every tracked file is whole: the big file is one of the contents ratchet ever wrote, never a
    mix or a short file, and the tree holds exactly the incumbent, or the incumbent plus the
    user's edit where the kill came before its commit;
  - results.csv has no torn or duplicate row, and each row's commit is where its status says
    (a keep on the branch, anything else under refs/ratchet/discarded/<id>, holding the edit);
  - no journal, scratch checkout or stray temporary file is left, no process of the run lives.
Usage: scripts/kill-loop.py [ITERATIONS] [BINARY]   (default 40, target/release/ratchet)
Prints the counts; exits 1 on the first broken invariant, naming it.
"""
import csv, os, random, shutil, signal, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
BIN = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "target/release/ratchet"))
BENCH = os.path.join(ROOT, "tests/support/fake_bench.py")
BIG = 16 << 20
CONFIG = f"""[benchmark]
command = "python3 {BENCH}"
timeout_s = 20
kill_grace_s = 0.5
warmup = 0
iters = 3
profile_iters = 0
[hardware]
preset = "tpu-v5e"
[decision]
min_pairs = 2
max_pairs = 4
confirm_pairs = 2
"""


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def fail(what):
    print(f"BROKEN: {what}")
    sys.exit(1)


def decided(repo):
    try:
        return '"phase": "decided"' in open(os.path.join(repo, ".ratchet", "journal.json")).read().lower()
    except OSError:
        return False


def writing_back(repo):
    try:
        return any(n.startswith("checkout.tmp.") for n in os.listdir(os.path.join(repo, ".ratchet")))
    except OSError:
        return False


def kill_after(cmd, repo, delay, env, at=None):
    """Run cmd; SIGKILL it (and, one time in three, its benchmark's group) after delay s, counted
    from the start or from the moment `at(repo)` holds (the decision made, files being written back)."""
    p = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if at:
        while p.poll() is None and not at(repo):
            time.sleep(0.001)
    try:
        p.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        pass
    if random.random() < 1 / 3:
        pgid = os.path.join(repo, ".ratchet", "run.pgid")
        try:
            import json
            g = json.load(open(pgid)).get("pgid", 0)
            if g > 1:
                os.killpg(g, signal.SIGKILL)
        except (OSError, ValueError):
            pass
    p.kill()
    p.wait()
    return True


def main():
    random.seed(int(os.environ.get("KILL_SEED", "1")))
    repo = tempfile.mkdtemp(prefix="ratchet-kill-loop-")
    env = dict(os.environ, HOME=repo + "-home", GIT_CONFIG_NOSYSTEM="1")
    os.makedirs(env["HOME"])
    for k in ("FAKE_MODE", "FAKE_LATENCY_MS"):
        env.pop(k, None)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Kill Loop")
    git(repo, "config", "user.email", "kill@loop")
    open(os.path.join(repo, "ratchet.toml"), "w").write(CONFIG)
    open(os.path.join(repo, "fake.env"), "w").write("FAKE_LATENCY_MS=10\n")
    open(os.path.join(repo, "big.dat"), "wb").write(b"0" * BIG)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "baseline")
    # One finished experiment first, so later ones roll the incumbent checkout forward too.
    subprocess.run([BIN, "-q", "--allow-empty", "warm-up"], cwd=repo, env=env, capture_output=True)
    counts = dict(iterations=0, anywhere=0, rollback=0, recovery=0, ratchet_killed=0, recover_killed=0, keep=0, revert=0, other=0,
                  before_commit=0)
    written = {b"0"}
    for i in range(ITERS):
        letter = bytes([ord("a") + i % 26])
        written.add(letter)
        # Half slower (reverted), half twice as fast as the incumbent (kept), down to 2 ms.
        incumbent = int(git(repo, "show", "HEAD:fake.env").split("=", 1)[1].split()[0])
        latency = incumbent * 2 if incumbent <= 2 or random.random() < 0.5 else incumbent // 2
        edit = f"FAKE_LATENCY_MS={latency}\n# iteration {i}\n"
        open(os.path.join(repo, "fake.env"), "w").write(edit)
        open(os.path.join(repo, "big.dat"), "wb").write(letter * BIG)
        base = git(repo, "rev-parse", "HEAD").strip()
        rows_before = len(rows(repo))
        mode = random.choice(["anywhere", "rollback", "recovery"])
        counts[mode] += 1
        cmd = [BIN, "-q", f"iteration {i}"]
        if mode == "anywhere":
            # Experiments of this set-up last about 1-4 s: kill anywhere in them.
            killed = kill_after(cmd, repo, random.uniform(0.05, 4.0), env)
        elif mode == "rollback":
            # In the keep or rollback that follows the decision (writing 16 MB back takes tens of ms).
            killed = kill_after(cmd, repo, random.uniform(0.0, 0.15), env, at=decided)
        else:
            # Stopped just before its rollback; the recovery that does it is killed at random.
            subprocess.run(cmd, cwd=repo, env=dict(env, RATCHET_FAULT="mid-revert"), capture_output=True)
            killed = True
        counts["ratchet_killed"] += killed
        if killed and (mode == "recovery" or random.random() < 0.5):
            counts["recover_killed"] += kill_after([BIN, "-q", "recover"], repo, random.uniform(0.0, 0.01), env, at=writing_back)
        r = subprocess.run([BIN, "recover"], cwd=repo, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"iteration {i}: recover exited {r.returncode}: {r.stderr.strip()}")
        if "edited since" in r.stdout:
            fail(f"iteration {i}: recovery took ratchet's own writes for a user's edit: {r.stdout.strip()}")
        check(repo, i, base, edit, letter, written, rows_before, counts)
        counts["iterations"] += 1
        # Back to a clean tree on the incumbent for the next iteration.
        if git(repo, "status", "--porcelain").strip():
            git(repo, "checkout", "-q", "--", ".")
    leftover = []
    for pid in subprocess.run(["pgrep", "-f", BENCH], capture_output=True, text=True).stdout.split():
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(repo):
                leftover.append(pid)
        except OSError:
            pass
    if leftover:
        fail(f"benchmark processes left running: {leftover}")
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    shutil.rmtree(repo, ignore_errors=True)
    shutil.rmtree(env["HOME"], ignore_errors=True)


def rows(repo):
    path = os.path.join(repo, "results", "results.csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def check(repo, i, base, edit, letter, written, rows_before, counts):
    big = open(os.path.join(repo, "big.dat"), "rb").read()
    if len(big) != BIG or big[:1] not in written or big.count(big[:1]) != BIG:
        fail(f"iteration {i}: big.dat is torn ({len(big)} bytes, starts {big[:1]!r})")
    rs = rows(repo)
    ids = [r["id"] for r in rs]
    if len(ids) != len(set(ids)):
        fail(f"iteration {i}: duplicate rows {ids}")
    if any(None in r.values() or None in r for r in rs):
        fail(f"iteration {i}: a torn row")
    head = git(repo, "rev-parse", "HEAD").strip()
    status = git(repo, "status", "--porcelain")
    fake = open(os.path.join(repo, "fake.env")).read()
    if len(rs) == rows_before:
        # Killed before its commit: the edit is still in the work tree, uncommitted.
        counts["before_commit"] += 1
        if head != base or fake != edit or big[:1] != letter:
            fail(f"iteration {i}: killed before its commit, the edit must stay in the tree")
        return
    r = rs[-1]
    if r["status"] == "keep":
        counts["keep"] += 1
        if head != r["commit"] or fake != edit or big[:1] != letter or status.strip():
            fail(f"iteration {i}: a keep must be HEAD with the edit and a clean tree: {status!r}")
    else:
        counts["revert" if r["status"] == "revert" else "other"] += 1
        if head != base or status.strip():
            fail(f"iteration {i}: a {r['status']} must leave the incumbent and a clean tree: {status!r}")
        parked = subprocess.run(["git", "-C", repo, "show", f"refs/ratchet/discarded/{r['id']}:fake.env"], capture_output=True, text=True)
        if parked.stdout != edit:
            fail(f"iteration {i}: the hypothesis of row {r['id']} is not parked whole")
    state = os.path.join(repo, ".ratchet")
    left = [n for n in os.listdir(state) if n == "journal.json" or n.startswith("checkout.tmp.") or ".tmp." in n]
    if left:
        fail(f"iteration {i}: left behind in .ratchet: {left}")


if __name__ == "__main__":
    main()
