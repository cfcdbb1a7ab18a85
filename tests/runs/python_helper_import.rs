//! `ratchet_bench` is importable when prepare.py runs by hand: through the directory
//! `ratchet pythonpath` prints, and as a package pip installs from python/.

use crate::support;

use support::TestRepo;

fn python_ok() -> bool {
    std::process::Command::new("python3").arg("-c").arg("import jax").output().is_ok_and(|o| o.status.success())
}

#[test]
fn pythonpath_prints_an_importable_helper() {
    if !python_ok() {
        eprintln!("NOTE: python3 with jax not available: skipping the import check");
        return;
    }
    let t = TestRepo::new();
    let out = t.ratchet().arg("pythonpath").output().unwrap();
    assert!(out.status.success());
    let dir = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(dir.ends_with(".ratchet/python"), "{dir}");
    let imp = std::process::Command::new("python3")
        .args(["-c", "import ratchet_bench, sys; print(ratchet_bench.__file__); assert callable(ratchet_bench.run)"])
        .env("PYTHONPATH", &dir)
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(imp.status.success(), "{}", String::from_utf8_lossy(&imp.stderr));
    assert!(String::from_utf8_lossy(&imp.stdout).contains(".ratchet/python/ratchet_bench.py"));
}

#[test]
fn python_dir_is_a_pip_installable_package() {
    let has_pip = std::process::Command::new("python3").args(["-m", "pip", "--version"]).output().is_ok_and(|o| o.status.success());
    let has_setuptools =
        std::process::Command::new("python3").args(["-c", "import setuptools, wheel"]).output().is_ok_and(|o| o.status.success());
    if !has_pip || !has_setuptools || !python_ok() {
        eprintln!("NOTE: python3 with pip, setuptools, wheel and jax not available: skipping the pip install check");
        return;
    }
    let target = tempfile::tempdir().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    // A copy: building in place would leave build/ and *.egg-info in the source tree.
    let copy = tempfile::tempdir().unwrap();
    for f in ["pyproject.toml", "README.md", "ratchet_bench.py"] {
        std::fs::copy(src.join(f), copy.path().join(f)).unwrap();
    }
    let pip = std::process::Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "--target"])
        .arg(target.path())
        .arg(copy.path())
        .output()
        .unwrap();
    assert!(pip.status.success(), "{}", String::from_utf8_lossy(&pip.stderr));
    assert!(target.path().join("ratchet_bench.py").exists());
    let cwd = tempfile::tempdir().unwrap();
    let imp = std::process::Command::new("python3")
        .args(["-c", "import ratchet_bench; assert callable(ratchet_bench.run)"])
        .env("PYTHONPATH", target.path())
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert!(imp.status.success(), "{}", String::from_utf8_lossy(&imp.stderr));
}
