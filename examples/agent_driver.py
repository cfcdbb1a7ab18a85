#!/usr/bin/env python3
"""An example agent loop that drives ratchet through --json alone (docs/agents.md).

It proposes block-size changes (BQ, BKV: the constants at the top of a Pallas kernel), one per
hypothesis, ordered by the diagnosis of the incumbent (`ratchet results --format json`: regime
and intensity), runs each with `ratchet "experiment: ..." --json`, acts on the decision object
(keep: build on it; inconclusive/unconfirmed: retry once with twice the pairs; anything else:
move on) and keeps a log of the ideas tried (JSON lines) so that it never proposes one twice on
the same incumbent, across restarts.

    python3 examples/agent_driver.py --kernel examples/flash_attention/kernel.py --max-hypotheses 4

Standard library only. Exit 0 when it ran out of ideas or hypotheses, non-zero when ratchet
reported a failure it must not retry (see docs/agents.md, "Exit codes").
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

SCHEMA_VERSION = 1
# The constants proposals edit (--params): BQ/BKV on an accelerator; the example kernel keeps
# its interpreter-sized blocks in CPU_BQ/CPU_BKV.
PARAMS = ("BQ", "BKV")
LOW, HIGH = 8, 1024


def ratchet(args, opts, check_json=True, whole=False):
    """Run ratchet; return (exit code, the JSON objects it printed on stdout: one per line, or
    with `whole` the one document that is its whole output)."""
    cmd = [opts.ratchet, "-C", opts.repo] + args
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None if opts.verbose else subprocess.DEVNULL, text=True)
    if whole:
        return proc.returncode, [json.loads(proc.stdout)] if proc.stdout.strip() else []
    objs = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        obj = json.loads(line)
        if check_json and isinstance(obj, dict) and obj.get("schema_version") not in (None, SCHEMA_VERSION):
            sys.exit(f"agent: ratchet speaks JSON schema {obj.get('schema_version')}, this driver knows {SCHEMA_VERSION}")
        objs.append(obj)
    return proc.returncode, objs


def read_params(kernel, names=PARAMS):
    text = open(kernel).read()
    found = {}
    for name in names:
        m = re.search(rf"^{name} = (\d+)$", text, re.M)
        if m:
            found[name] = int(m.group(1))
    return found


def set_param(kernel, name, old, new):
    text = open(kernel).read()
    line, repl = f"{name} = {old}\n", f"{name} = {new}\n"
    assert text.count(line) == 1, f"{line!r} must occur once in {kernel}"
    with open(kernel, "w") as f:
        f.write(text.replace(line, repl))


def proposals(params, diagnosis, names=PARAMS):
    """Block-size changes, one constant at a time, most promising first. Bigger blocks mean
    fewer grid steps and fewer K/V re-reads (higher arithmetic intensity): first when the
    incumbent is memory-bound or overhead-bound; smaller ones last (less VMEM, more overlap)."""
    regime = (diagnosis or {}).get("regime") or ""
    bigger_first = "COMPUTE" not in regime.upper()
    out = []
    for factor in ((2, 4, 0.5) if bigger_first else (0.5, 2, 4)):
        for name in names:
            if name not in params:
                continue
            new = int(params[name] * factor)
            if LOW <= new <= HIGH and new != params[name]:
                out.append((name, params[name], new))
    return out


def load_log(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=".", help="the ratchet repository (default: .)")
    ap.add_argument("--kernel", required=True, help="the kernel file, relative to the repo")
    ap.add_argument("--max-hypotheses", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=None, help="pairs per experiment (default: ratchet.toml's)")
    ap.add_argument("--log", default=None, help="ideas log (default: <repo>/.ratchet/agent-ideas.jsonl)")
    ap.add_argument("--ratchet", default=os.environ.get("RATCHET", "ratchet"), help="the ratchet binary")
    ap.add_argument("--verbose", action="store_true", help="show ratchet's text (stderr)")
    ap.add_argument(
        "--params",
        default=",".join(PARAMS),
        help="comma-separated block-size constants to tune (default: BQ,BKV; CPU_BQ,CPU_BKV for the example on CPU)",
    )
    opts = ap.parse_args()
    opts.repo = os.path.abspath(opts.repo)
    kernel = os.path.join(opts.repo, opts.kernel)
    log_path = opts.log or os.path.join(opts.repo, ".ratchet", "agent-ideas.jsonl")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)

    # 1. Before proposing: the state (finish what a dead run left), and what was tried.
    code, objs = ratchet(["status", "--json"], opts)
    if code != 0:
        sys.exit(f"agent: ratchet status failed ({code})")
    status = objs[-1]
    if status["running"]:
        sys.exit(f"agent: another ratchet is running: {status['running']}")
    if status["recovery"]:
        print("agent: recovering first:", "; ".join(status["recovery"]))
        ratchet(["recover"], opts, check_json=False)

    tried = {(e["incumbent"], e["param"], e["new"]) for e in load_log(log_path)}
    done = 0
    summary = []
    while done < opts.max_hypotheses:
        _, objs = ratchet(["status", "--json"], opts)
        incumbent = objs[-1]["incumbent"]
        _, rows = ratchet(["results", "--format", "json"], opts, check_json=False, whole=True)
        rows = rows[0] if rows else []
        kept = [r for r in rows if r["status"] == "keep"]
        diagnosis = kept[-1] if kept else (rows[-1] if rows else None)
        names = tuple(n.strip() for n in opts.params.split(",") if n.strip())
        params = read_params(kernel, names)
        ideas = [p for p in proposals(params, diagnosis, names) if (incumbent, p[0], p[2]) not in tried]
        if not ideas:
            print("agent: no untried idea left on this incumbent")
            break
        name, old, new = ideas[0]
        message = f"experiment: {name} {old} -> {new}"
        set_param(kernel, name, old, new)
        pairs = opts.pairs
        attempt = 0
        while True:
            args = [message, "--json"] + (["--pairs", str(pairs)] if pairs else [])
            code, objs = ratchet(args, opts)
            last = objs[-1] if objs else {"type": "error", "kind": "failure", "message": f"no JSON (exit {code})", "exit_code": code}
            runs = sum(1 for o in objs if o.get("type") == "run")
            if last["type"] == "error":
                entry = {"incumbent": incumbent, "param": name, "old": old, "new": new, "status": "error", "error": last}
                with open(log_path, "a") as f:
                    f.write(json.dumps(entry) + "\n")
                if last["kind"] == "locked":
                    time.sleep(5)
                    continue
                # Anything else (set-up broken, unsafe repo, interrupted) is for a human.
                print(f"agent: ratchet failed: {last['message']} (hint: {last.get('hint')})", file=sys.stderr)
                return last["exit_code"] or 1
            d = last
            print(
                f"agent: {message}: {d['status']} (delta {d['delta_pct']}%, CI [{d['ci_low_pct']}, {d['ci_high_pct']}], "
                f"p {d['p_value']} <= {d['p_threshold']}?, {d['pairs']} pairs, {runs} runs)"
            )
            if d["status"] in ("inconclusive", "unconfirmed") and attempt == 0 and d.get("discarded_ref"):
                # Retry once with twice the pairs, from the parked hypothesis.
                subprocess.run(["git", "-C", opts.repo, "cherry-pick", "--no-commit", d["discarded_ref"]], check=True)
                subprocess.run(["git", "-C", opts.repo, "reset", "-q"], check=True)
                pairs = 2 * max(d["pairs"], 4)
                attempt += 1
                continue
            break
        entry = {
            "incumbent": incumbent,
            "param": name,
            "old": old,
            "new": new,
            "id": d["id"],
            "status": d["status"],
            "delta_pct": d["delta_pct"],
            "commit": d["commit"],
        }
        with open(log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")
        tried.add((incumbent, name, new))
        summary.append(entry)
        done += 1
    print(json.dumps({"agent": "done", "hypotheses": len(summary), "kept": sum(e["status"] == "keep" for e in summary)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
