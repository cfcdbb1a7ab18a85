"""ratchet_preload: a pre-imported Python parent that forks one child per benchmark run.

ratchet starts it once per interpreter and environment (docs/protocol.md, "Forked runs"). It
imports what every run imports (jax, numpy, ratchet_bench and the installed modules earlier
runs used), touches no device, and then forks a child for each run; the child takes the run's
working directory, environment, argv and output pipes and runs the script as `python SCRIPT`
would. Each run so still starts its own backend, allocates afresh and compiles or loads its
kernel from the cache; only the imports are not paid again.

Protocol, one JSON object a line: ratchet writes requests on stdin, this process answers on
stdout (its own output goes to stderr):
  <- {"hello": PID, "import_s": S, "modules": N}        once started (or {"refuse": WHY})
  -> {"run": {"argv", "cwd", "env", "stdout", "stderr", "grace_s"}}
  <- {"ready": PID, "start": TICKS}                    the child runs, in a process group of its own
  <- {"exit": "code" | "signal", "n": N}               the child and everything it left are gone
  <- {"retire": WHY}                                   after a run, when this parent can no longer fork safely
End of stdin ends this process.
"""

import time

_START_NS = time.monotonic_ns()

import ctypes  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import sysconfig  # noqa: E402
import threading  # noqa: E402

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True)
# The run being served: its leader's pid, so a stop signal to this parent stops it too.
_current = 0


def _prctl(option, value):
    _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                ctypes.c_ulong(0))


def _installed_roots():
    """Where installed modules live (the standard library and site-packages, and ratchet's own
    helpers beside this file), never a repo."""
    roots = {os.path.dirname(os.path.realpath(__file__)) + os.sep}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path) + os.sep)
    return tuple(roots)


def installed_modules(modules, roots, skip=()):
    """Names of the modules in `modules` (less `skip`) whose file lies under `roots`: the ones
    safe to share."""
    names = []
    for name, module in list(modules.items()):
        if name in skip:
            continue
        path = getattr(module, "__file__", None)
        if not path or name.startswith("__main__") or name == "ratchet_preload":
            continue
        if os.path.realpath(path).startswith(roots):
            names.append(name)
    return sorted(names)


def unsafe_to_fork():
    """Why this process may not fork runs, or None: a JAX backend already made (a device
    touched at import) or a Python thread running (a fork would copy its locks mid-use).
    Native pools (OpenBLAS) re-create their threads through pthread_atfork."""
    xb = sys.modules.get("jax._src.xla_bridge")
    if xb is not None and getattr(xb, "_backends", None):
        return "a JAX backend was initialised while importing"
    if threading.active_count() > 1:
        return f"{threading.active_count() - 1} Python thread(s) started while importing"
    return None


def _read_list(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_list(path, data):
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        pass


# Names that failed to import alone: not tried again after every run.
_failed = set()


def preload(names, refused):
    """Import `names` (skipping the refused); returns the name that made forking unsafe, if any."""
    import importlib

    for name in names:
        if name in sys.modules or name in refused or name in _failed:
            continue
        try:
            importlib.import_module(name)
        except BaseException:  # a module that cannot be imported alone is left to the run
            _failed.add(name)
            continue
        if unsafe_to_fork():
            return name
    return None


def _children():
    me = os.getpid()
    found = []
    try:
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children", encoding="ascii") as f:
                found += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return found


def _reap_all(grace_s):
    """Stop and reap every process left under this parent (it is their subreaper): what the
    run's leader left behind dies with the run."""
    deadline = time.monotonic() + grace_s
    sig = signal.SIGTERM
    while True:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
        left = _children()
        if not left:
            return
        if time.monotonic() > deadline:
            sig = signal.SIGKILL
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _start_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def _exit_code(code):
    # As the interpreter does with SystemExit's argument.
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run_main(script):
    """Run `script` as `python SCRIPT` does: a fresh `__main__` module with an absolute
    `__file__`, sys.argv[0] as given (runpy.run_path would rewrite it)."""
    import builtins
    import importlib.machinery
    import types

    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__builtins__ = builtins
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    main.__spec__ = None
    main.__cached__ = None
    sys.modules["__main__"] = main
    with open(script, "rb") as f:
        code = compile(f.read(), script, "exec")
    exec(code, main.__dict__)


def _child(req, sync_w, modules_file, roots):
    """Become the run: its group, pipes, directory, environment and argv; then its script."""
    forked_ns = time.monotonic_ns()
    inherited = set(sys.modules)
    try:
        os.setpgid(0, 0)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        out = os.open(req["stdout"], os.O_WRONLY)
        err = os.open(req["stderr"], os.O_WRONLY)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (out, err, null):
            os.close(fd)
        # A fresh stdin object: the parent's may hold read-ahead bytes of its request pipe.
        sys.stdin = sys.__stdin__ = open(0, encoding=sys.stdin.encoding, errors=sys.stdin.errors, closefd=False)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        argv = list(req["argv"])
        script = os.path.abspath(argv[0])
        sys.argv = argv
        sys.path[0] = os.path.dirname(script)
    except BaseException as e:
        os.write(2, f"ratchet_preload: cannot start the run: {e}\n".encode())
        os._exit(127)
    os.write(sync_w, b"k")
    os.close(sync_w)
    rb = sys.modules.get("ratchet_bench")
    if rb is not None:
        # Its phases start at this fork: the imports were the parent's (phases_s.imports 0).
        rb._MODULE_START_NS = rb._MODULE_END_NS = forked_ns
    try:
        import numpy

        numpy.random.seed()  # a fresh process draws a fresh seed; a fork would share the parent's
    except Exception:
        pass
    code = 0
    try:
        _run_main(script)
    except SystemExit as e:
        code = _exit_code(e.code)
    except KeyboardInterrupt:
        code = 130
    except BaseException as e:
        # As the interpreter reports it: from the script's own frames (none of ours), and a
        # SyntaxError without a traceback.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        code = 1
    try:
        threading._shutdown()  # what the interpreter's exit waits for
    except Exception:
        pass
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    # What this run imported that the next parent can import for it (once the list is whole,
    # nothing: the file is not even read).
    new = set(installed_modules(sys.modules, roots, skip=inherited | _failed))
    if new and modules_file:
        learnt = _read_list(modules_file)
        names = set(learnt.get("modules", []))
        if new - names:
            learnt["modules"] = sorted(names | new)
            _write_list(modules_file, learnt)
    os._exit(code)


def _stop(signum, frame):
    # ratchet is gone or asks us to stop: the run and what it left go with us.
    if _current:
        try:
            os.killpg(_current, signal.SIGKILL)
        except OSError:
            pass
    _reap_all(0.5)
    os._exit(128 + signum)


def serve(req, reply, modules_file, roots):
    global _current
    r, w = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(req, w, modules_file, roots)
    os.close(w)
    _current = pid
    os.read(r, 1)  # the child holds its pipes (or has exited)
    os.close(r)
    reply({"ready": pid, "start": _start_ticks(pid)})
    _, status = os.waitpid(pid, 0)
    _current = 0
    _reap_all(float(req.get("grace_s", 5.0)))
    if os.WIFSIGNALED(status):
        reply({"exit": "signal", "n": os.WTERMSIG(status)})
    else:
        reply({"exit": "code", "n": os.waitstatus_to_exitcode(status)})


def main():
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # what an import prints is not a reply

    def reply(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    modules_file = sys.argv[1] if len(sys.argv) > 1 else ""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    signal.signal(signal.SIGINT, _stop)  # how a later ratchet's recovery stops a supervisor
    roots = _installed_roots()
    learnt = _read_list(modules_file) if modules_file else {}
    refused = set(learnt.get("refused", []))
    bad = preload(learnt.get("modules", []), refused)
    if bad:
        if modules_file:
            learnt["refused"] = sorted(refused | {bad})
            _write_list(modules_file, learnt)
        reply({"refuse": f"{unsafe_to_fork()} (module {bad})"})
        return
    reply({"hello": os.getpid(), "import_s": (time.monotonic_ns() - _START_NS) / 1e9,
           "modules": len(sys.modules)})
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)["run"]
        except (ValueError, KeyError, TypeError):
            reply({"retire": f"unreadable request {line[:80]!r}"})
            return
        serve(req, reply, modules_file, roots)
        # The run may have taught us modules: import them now, between runs.
        if modules_file:
            learnt = _read_list(modules_file)
            bad = preload(learnt.get("modules", []), set(learnt.get("refused", [])))
            if bad:
                learnt["refused"] = sorted(set(learnt.get("refused", [])) | {bad})
                _write_list(modules_file, learnt)
                reply({"retire": f"{unsafe_to_fork()} (module {bad})"})
                return


if __name__ == "__main__":
    main()
