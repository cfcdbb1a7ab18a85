"""Tests of the FlashAttention example: the kernel's numbers, and that its hypotheses apply.

`ratchet sweep` (scripts/demo.sh) applies the repo's experiments/*.toml in name order on
top of the kept ones; these tests replay that sequence with the decisions the example is
built to produce (bigger blocks kept, smaller blocks reverted, the broken kernel invalid)
and check each edit lands exactly once and does what it says. `apply_hypothesis` below is
the format's literal-edit semantics (experiments/README.md) in a few lines; ratchet's own
implementation (src/sweep/hypothesis.rs) is tested by the Rust tests (tests/decisions/sweep.rs).
"""

import importlib.util
import os
import shutil
import tempfile
import tomllib
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(REPO, "examples", "flash_attention")
EXPERIMENTS = os.path.join(REPO, "experiments")
KERNEL_REL = os.path.join("examples", "flash_attention", "kernel.py")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

# Whether each experiment stays in the tree for the next one (the expected decision).
EXPECTED_KEPT = {
    "01-bigger-q-blocks.toml": True,
    "02-smaller-kv-blocks.toml": False,
    "03-bigger-kv-blocks.toml": True,
    "04-compact-softmax-stats.toml": True,
    "05-skip-accumulator-rescale.toml": False,
}


class DoesNotApply(Exception):
    pass


class Malformed(Exception):
    pass


def load_hypothesis(path):
    """(message, edits) of a hypothesis file with literal [[edit]] tables."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    unknown = set(doc) - {"message", "tags", "edit", "patch", "deep", "pairs"}
    if unknown:
        raise Malformed(f"unknown keys {sorted(unknown)}")
    for edit in doc.get("edit", []):
        parts = edit["file"].split("/")
        if os.path.isabs(edit["file"]) or ".." in parts:
            raise Malformed(f"file {edit['file']!r} must be a path inside the repo")
    return doc["message"].strip(), doc.get("edit", [])


def apply_hypothesis(path, root):
    """Apply every edit in memory, then write: DoesNotApply leaves the tree untouched."""
    _, edits = load_hypothesis(path)
    contents = {}
    for i, edit in enumerate(edits, 1):
        p = os.path.join(root, edit["file"])
        if p not in contents:
            with open(p, encoding="utf-8", newline="") as f:
                contents[p] = f.read()
        n = contents[p].count(edit["find"])
        if n != 1:
            raise DoesNotApply(f"[[edit]] #{i}: `find` found {n} times in {edit['file']}")
        contents[p] = contents[p].replace(edit["find"], edit["replace"])
    for p, text in contents.items():
        with open(p, "w", encoding="utf-8", newline="") as f:
            f.write(text)


def load_kernel(path, name):
    """Import a kernel.py from any directory under a unique module name."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(heads=1, seq=128, head_dim=32, dtype=jnp.bfloat16):
    kq, kk, kv = jax.random.split(jax.random.PRNGKey(1), 3)
    shape = (heads, seq, head_dim)
    return tuple(jax.random.normal(key, shape, dtype) for key in (kq, kk, kv))


def max_err(kernel, q, k, v, **kw):
    out = kernel.flash_attention(q, k, v, **kw)
    ref = kernel.reference_attention(q, k, v)
    return float(jnp.max(jnp.abs(out.astype(jnp.float32) - ref)))


class KernelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.k = load_kernel(os.path.join(EXAMPLE, "kernel.py"), "fa_kernel_base")

    def test_block_constants_are_plain_lines(self):
        with open(os.path.join(EXAMPLE, "kernel.py")) as f:
            lines = f.read().splitlines()
        # CPU (interpreter) blocks, edited by experiments/*.toml; accelerator blocks, edited by
        # experiments/accelerator/*.toml (the article's baseline, section 3.4).
        self.assertIn("CPU_BQ = 32", lines)
        self.assertIn("CPU_BKV = 32", lines)
        self.assertIn("BQ = 128", lines)
        self.assertIn("BKV = 256", lines)
        self.assertEqual(self.k.default_blocks("mosaic"), (128, 256))
        self.assertEqual(self.k.default_blocks("triton"), (128, 64))
        self.assertEqual(self.k.default_blocks("interpret"), (32, 32))

    def test_cost_estimate_matches_the_roofline_inputs(self):
        # The pallas_call's CostEstimate carries compute_flops() and the re-read traffic.
        meta = self.k.get_tiling_meta(1, 16384, 128, bq=128, bkv=256)
        c = self.k.cost_estimate(1, 16384, 16384, 128, meta["num_q_blocks"], meta["num_kv_blocks"], 2)
        self.assertEqual(c.flops, self.k.compute_flops(1, 16384, 128))
        self.assertEqual(c.bytes_accessed, self.k.estimate_actual_memory_traffic(meta, 2))
        self.assertEqual(c.transcendentals, 16384 * (16384 + 64))

    def test_grid_kernel_matches_reference(self):
        q, k, v = inputs(heads=2)
        for bq, bkv in ((32, 32), (64, 16), (128, 128)):
            with self.subTest(bq=bq, bkv=bkv):
                self.assertLess(max_err(self.k, q, k, v, bq=bq, bkv=bkv, variant="interpret"), 2e-2)

    def test_loop_kernel_matches_reference(self):
        # The Triton form, run by the interpreter: same algorithm, KV loop inside.
        q, k, v = inputs(heads=2)
        self.assertLess(max_err(self.k, q, k, v, bq=32, bkv=64, variant="interpret-loop"), 2e-2)

    def test_f32_is_tight(self):
        q, k, v = inputs(dtype=jnp.float32)
        self.assertLess(max_err(self.k, q, k, v, variant="interpret"), 1e-4)

    def test_rejects_ragged_blocks(self):
        q, k, v = inputs(seq=96)
        with self.assertRaisesRegex(ValueError, "multiple of BQ"):
            self.k.flash_attention(q, k, v, bq=64, bkv=32, variant="interpret")

    def test_article_figures(self):
        # Single head, seq=16384, d=128: ~138.8 GFLOP; with 16 Q blocks (BQ=1024) K and V
        # are each read 16 times, 136 MiB in all (4 + 64 + 64 + 4).
        self.assertAlmostEqual(self.k.compute_flops(1, 16384, 128) / 1e9, 138.8, delta=0.05)
        meta = self.k.get_tiling_meta(1, 16384, 128, bq=1024, bkv=512)
        self.assertEqual(meta["num_q_blocks"], 16)
        self.assertEqual(self.k.estimate_actual_memory_traffic(meta, 2), 136 * 2**20)
        self.assertEqual(self.k.minimum_memory_traffic(meta, 2), 16 * 2**20)
        self.assertEqual(meta["grid_steps"], 16 * 32)

    def test_triton_rereads_come_from_l2_while_k_and_v_fit(self):
        # The Triton form at the article's size: K and V (8 MiB together) fit in any GPU's L2,
        # so each is read from HBM once whatever BQ is; the cost estimate says the same.
        meta = self.k.get_tiling_meta(1, 16384, 128, bq=64, bkv=64, variant="triton")
        meta["variant"] = "triton"
        self.assertEqual(self.k.estimate_actual_memory_traffic(meta, 2), 16 * 2**20)
        c = self.k.cost_estimate(1, 16384, 16384, 128, 256, 256, 2, "triton")
        self.assertEqual(c.bytes_accessed, 16 * 2**20)
        # Past the L2 (seq 131072: 64 MiB of K and V) the re-reads are HBM traffic again.
        big = self.k.get_tiling_meta(1, 131072, 128, bq=64, bkv=64, variant="triton")
        big["variant"] = "triton"
        tile = 131072 * 128 * 2
        self.assertEqual(self.k.estimate_actual_memory_traffic(big, 2), 2 * tile + 2 * tile * 2048)


class ExperimentsTest(unittest.TestCase):
    """Replay experiments/ in name order on a copy of the example."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="fa-experiments-")
        cls.root = os.path.join(cls.tmp, "repo")
        # The layout of this repo: the example under examples/, its hypotheses at the top.
        shutil.copytree(EXAMPLE, os.path.join(cls.root, "examples", "flash_attention"),
                        ignore=shutil.ignore_patterns(".ratchet", "__pycache__", "profile_data"))
        shutil.copytree(EXPERIMENTS, os.path.join(cls.root, "experiments"))
        cls.names = sorted(os.listdir(os.path.join(cls.root, "experiments")))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def apply(self, name):
        apply_hypothesis(os.path.join(self.root, "experiments", name), self.root)

    def test_sequence(self):
        self.assertEqual([n for n in self.names if n.endswith(".toml")], sorted(EXPECTED_KEPT))
        path = os.path.join(self.root, KERNEL_REL)
        # Several KV blocks even at BKV=128, or the missing rescale would go unnoticed.
        q, k, v = inputs(seq=512)
        for i, name in enumerate(sorted(EXPECTED_KEPT)):
            with self.subTest(experiment=name):
                with open(path) as f:
                    before = f.read()
                self.apply(name)
                with open(path) as f:
                    after = f.read()
                self.assertNotEqual(before, after)
                kern = load_kernel(path, f"fa_kernel_exp{i}")
                err = max_err(kern, q, k, v)
                if name.startswith("05-"):
                    self.assertGreater(err, 0.1, "the broken kernel must fail the check")
                else:
                    self.assertLess(err, 2e-2)
                if not EXPECTED_KEPT[name]:
                    with open(path, "w") as f:
                        f.write(before)
        final = load_kernel(path, "fa_kernel_final")
        self.assertEqual((final.CPU_BQ, final.CPU_BKV), (128, 128))
        self.assertEqual((final.BQ, final.BKV), (128, 256))
        self.assertEqual(final._stats_shape(128, 64), (128, 1))

    def test_message_and_refusal(self):
        message, _ = load_hypothesis(os.path.join(EXPERIMENTS, "01-bigger-q-blocks.toml"))
        self.assertEqual(message, "experiment: BQ 32 -> 128 (4x fewer K/V re-reads)")
        # On a tree where the find string is gone the file must be left untouched.
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, os.path.dirname(KERNEL_REL)))
            with open(os.path.join(d, KERNEL_REL), "w") as f:
                f.write("BQ = 64\n")
            with self.assertRaisesRegex(DoesNotApply, "found 0 times in " + KERNEL_REL):
                apply_hypothesis(os.path.join(EXPERIMENTS, "01-bigger-q-blocks.toml"), d)
            with open(os.path.join(d, KERNEL_REL)) as f:
                self.assertEqual(f.read(), "BQ = 64\n")

    def test_malformed_file_rejected(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.toml")
            with open(bad, "w") as f:
                f.write('message = "x"\n[[edit]]\nfile = "../etc/passwd"\nfind = "a"\nreplace = "b"\n')
            with self.assertRaisesRegex(Malformed, "must be a path inside the repo"):
                apply_hypothesis(bad, d)

    def test_every_hypothesis_uses_only_documented_keys(self):
        for name in self.names:
            if name.endswith(".toml"):
                with self.subTest(name=name):
                    load_hypothesis(os.path.join(EXPERIMENTS, name))



def lowered_progression(subdir, variant, platform):
    """Apply experiments/SUBDIR/*.toml in name order to a copy of the example and lower the kernel
    after each step for PLATFORM on this host: yields (file name, the kernel module as it stands,
    its kernel bodies as ratchet_bench decodes them)."""
    import sys
    sys.path.insert(0, os.path.join(REPO, "python"))
    import ratchet_bench

    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, os.path.dirname(KERNEL_REL)))
        shutil.copy(os.path.join(REPO, KERNEL_REL), os.path.join(d, KERNEL_REL))
        steps = os.path.join(EXPERIMENTS, subdir)
        spec = jax.ShapeDtypeStruct((1, 16384, 128), jnp.bfloat16)
        for i, name in enumerate(sorted(os.listdir(steps))):
            apply_hypothesis(os.path.join(steps, name), d)
            kern = load_kernel(os.path.join(d, KERNEL_REL), f"fa_{subdir}_{i}")
            fn = jax.jit(lambda q, k, v, kern=kern: kern.flash_attention(q, k, v, variant=variant))
            lowered = fn.trace(spec, spec, spec).lower(lowering_platforms=(platform,))
            yield name, kern, ratchet_bench.kernel_bodies(lowered.compiler_ir("stablehlo"))


class AcceleratorExperimentsTest(unittest.TestCase):
    """experiments/accelerator/: the article's progression, each step lowered for TPU (Mosaic)
    on this host; the kernel body must keep the article's op counts and its grid must match
    the tiling meta the benchmark reports."""

    def test_progression_lowers_for_tpu(self):
        blocks = []
        for name, kern, bodies in lowered_progression("accelerator", "mosaic", "tpu"):
            body = bodies[0]["text"]
            self.assertEqual(body.count("tpu.matmul"), 2, name)
            self.assertEqual(body.count("math.exp"), 2, name)
            meta = kern.get_tiling_meta(1, 16384, 128, variant="mosaic")
            bounds = f"iteration_bounds = array<i64: 1, {meta['num_q_blocks']}, {meta['num_kv_blocks']}>"
            self.assertIn(bounds, body, name)
            blocks.append((kern.BQ, kern.BKV))
        self.assertEqual(blocks, [(512, 256), (1024, 256), (1024, 512), (1024, 1024), (1024, 1024)])


class GpuExperimentsTest(unittest.TestCase):
    """experiments/gpu/: the Triton form's progression (warps, stages, tiles), each step applied in
    order and lowered for CUDA on this host; each must keep the kernel's two matmuls, report the
    compiler settings it uses, and move the constants as the files say."""

    def test_progression_lowers_for_cuda(self):
        steps = []
        for name, kern, bodies in lowered_progression("gpu", "triton", "cuda"):
            self.assertEqual(len(bodies), 1, name)
            self.assertEqual(bodies[0]["text"].count("tt.dot"), 2, name)
            meta = kern.get_tiling_meta(1, 16384, 128, variant="triton")
            self.assertEqual((meta["num_warps"], meta["num_stages"]), (kern.GPU_WARPS, kern.GPU_STAGES))
            steps.append((kern.GPU_BQ, kern.GPU_BKV, kern.GPU_WARPS, kern.GPU_STAGES))
        self.assertEqual(steps, [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 3), (256, 128, 8, 3)])


if __name__ == "__main__":
    unittest.main()
