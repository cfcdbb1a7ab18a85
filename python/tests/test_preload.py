"""The pre-imported parent (ratchet_preload): a forked run sees what a fresh `python SCRIPT`
sees (argv, path, cwd, environment, exit status, atexit), the parent learns installed modules
and never a repo's, and it refuses to fork once an import started a thread."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
sys.path.insert(0, PYTHON_DIR)

import ratchet_preload as rp  # noqa: E402

# Prints what a script can see of how it was started; exits as MODE says.
PROBE = textwrap.dedent(
    """
    import atexit, json, os, sys
    import helper  # from the script's own directory, as Python puts it on sys.path
    atexit.register(lambda: print("atexit ran", flush=True))
    print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(),
                      "name": __name__, "file": __file__, "var": os.environ.get("PROBE_VAR"),
                      "helper": helper.WHERE, "stdin": sys.stdin.read()}))
    mode = os.environ.get("MODE", "")
    if mode == "code":
        sys.exit(3)
    if mode == "text":
        sys.exit("a message")
    if mode == "raise":
        raise ValueError("boom")
    if mode == "syntax":
        exec(compile("x = (", "<probe>", "exec"))
    """
)


class Parent:
    """A parent started as ratchet starts it, driven over its pipes."""

    def __init__(self, modules_file, env=None):
        self.p = subprocess.Popen([sys.executable, os.path.join(PYTHON_DIR, "ratchet_preload.py"), modules_file],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env or dict(os.environ), text=True)
        self.hello = json.loads(self.p.stdout.readline())

    def run(self, argv, cwd, env, tmp):
        out, err = os.path.join(tmp, "out.fifo"), os.path.join(tmp, "err.fifo")
        for f in (out, err):
            if os.path.exists(f):
                os.remove(f)
            os.mkfifo(f)
        fds = [os.open(f, os.O_RDONLY | os.O_NONBLOCK) for f in (out, err)]
        self.p.stdin.write(json.dumps({"run": {"argv": argv, "cwd": cwd, "env": env, "stdout": out,
                                                "stderr": err, "grace_s": 1}}) + "\n")
        self.p.stdin.flush()
        ready = json.loads(self.p.stdout.readline())
        texts = [b"", b""]

        def drain(i):
            os.set_blocking(fds[i], True)
            while chunk := os.read(fds[i], 65536):
                texts[i] += chunk

        threads = [threading.Thread(target=drain, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        end = json.loads(self.p.stdout.readline())
        for t in threads:
            t.join()
        return ready, end, texts[0].decode(), texts[1].decode()

    def close(self):
        self.p.stdin.close()
        code = self.p.wait(timeout=60)
        self.p.stdout.close()
        return code


def fresh(argv, cwd, env):
    p = subprocess.run([sys.executable] + argv, cwd=cwd, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


class ForkedRunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.repo = os.path.join(self.root, "repo")
        os.makedirs(os.path.join(self.repo, "bench"))
        with open(os.path.join(self.repo, "bench", "probe.py"), "w") as f:
            f.write(PROBE)
        with open(os.path.join(self.repo, "bench", "helper.py"), "w") as f:
            f.write("WHERE = __file__\n")
        self.modules = os.path.join(self.root, "preload.json")
        self.parent = Parent(self.modules)

    def tearDown(self):
        self.parent.close()
        self.tmp.cleanup()

    def test_a_forked_run_sees_what_a_fresh_process_sees(self):
        for mode in ("", "code", "text", "raise", "syntax"):
            env = dict(os.environ, PROBE_VAR="per-run value", MODE=mode)
            argv = ["bench/probe.py", "--flag", "x y"]
            ready, end, out, err = self.parent.run(argv, self.repo, env, self.root)
            want_code, want_out, want_err = fresh(argv, self.repo, env)
            self.assertEqual(end, {"exit": "code", "n": want_code}, mode)
            self.assertEqual(out, want_out, mode)
            self.assertEqual(json.loads(out.splitlines()[0])["var"], "per-run value")
            self.assertIn("atexit ran", out)
            self.assertEqual(err, want_err, mode)
            self.assertGreater(ready["ready"], 0)

    def test_each_run_is_a_new_process_in_a_group_of_its_own(self):
        script = os.path.join(self.repo, "bench", "ids.py")
        with open(script, "w") as f:
            f.write("import os\nprint(os.getpid(), os.getpgid(0), os.getppid())\n")
        seen = []
        for _ in range(2):
            ready, end, out, _ = self.parent.run(["bench/ids.py"], self.repo, dict(os.environ), self.root)
            pid, pgid, ppid = map(int, out.split())
            self.assertEqual((pid, pgid), (ready["ready"], ready["ready"]))
            self.assertEqual(ppid, self.parent.hello["hello"])
            seen.append(pid)
        self.assertNotEqual(seen[0], seen[1])

    def test_what_a_run_leaves_behind_dies_with_it(self):
        script = os.path.join(self.repo, "bench", "leave.py")
        pidf = os.path.join(self.root, "left.pid")
        with open(script, "w") as f:
            f.write(textwrap.dedent(f"""
                import subprocess
                p = subprocess.Popen(["sleep", "300"], start_new_session=True)
                open({pidf!r}, "w").write(str(p.pid))
            """))
        _, end, _, _ = self.parent.run(["bench/leave.py"], self.repo, dict(os.environ), self.root)
        self.assertEqual(end, {"exit": "code", "n": 0})
        with open(pidf) as f:
            pid = int(f.read())
        # Reaped by the parent before it reported the end: no such process any more.
        self.assertFalse(os.path.exists(f"/proc/{pid}"), f"{pid} outlived its run")

    def test_the_parent_learns_installed_modules_and_never_the_repos(self):
        script = os.path.join(self.repo, "bench", "uses.py")
        with open(script, "w") as f:
            f.write("import helper, csv, decimal\n")
        self.parent.run(["bench/uses.py"], self.repo, dict(os.environ), self.root)
        with open(self.modules) as f:
            learnt = json.load(f)["modules"]
        self.assertIn("csv", learnt)
        self.assertIn("decimal", learnt)
        self.assertNotIn("helper", learnt)
        self.assertNotIn("__main__", learnt)
        # A new parent imports them before its first run.
        second = Parent(self.modules)
        try:
            self.assertGreaterEqual(second.hello["modules"], self.parent.hello["modules"])
        finally:
            second.close()


class RefusalTest(unittest.TestCase):
    def test_a_module_that_starts_a_thread_makes_the_parent_refuse_and_is_remembered(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "spins.py"), "w") as f:
                f.write("import threading, time\n"
                        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n")
            modules = os.path.join(tmp, "preload.json")
            with open(modules, "w") as f:
                json.dump({"modules": ["spins"]}, f)
            env = dict(os.environ, PYTHONPATH=tmp + os.pathsep + os.environ.get("PYTHONPATH", ""))
            parent = Parent(modules, env)
            self.assertIn("refuse", parent.hello)
            self.assertIn("thread", parent.hello["refuse"])
            parent.close()
            with open(modules) as f:
                self.assertEqual(json.load(f)["refused"], ["spins"])
            # The next parent leaves it to the runs and serves them.
            again = Parent(modules, env)
            self.assertIn("hello", again.hello)
            again.close()

    def test_unsafe_to_fork_names_a_running_thread_or_a_backend(self):
        # In a fresh interpreter: this test process may already hold a backend of its own.
        probe = textwrap.dedent("""
            import threading, ratchet_preload as rp
            print(rp.unsafe_to_fork())
            stop = threading.Event()
            t = threading.Thread(target=stop.wait)
            t.start()
            print(rp.unsafe_to_fork())
            stop.set()
            t.join()
            import jax
            jax.devices()
            print(rp.unsafe_to_fork())
        """)
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], "None")
        self.assertIn("thread", lines[1])
        self.assertIn("backend", lines[2])

if __name__ == "__main__":
    unittest.main()
