"""`pip install .` from this checkout into a fresh virtual environment, reusing the CMake build
the tests use (scikit-build-core's build-dir), so the engine is not compiled twice; then the
installed package runs a request from outside the repository. CTest runs it alone (it
reconfigures that build, and puts its cache back after). Skips when PyPI (scikit-build-core,
pybind11) cannot be reached, or with OFFGEN_TEST_PIP_INSTALL=0."""

import os
import pathlib
import subprocess
import sys
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pypi_reachable():
    try:
        urllib.request.urlopen("https://pypi.org/simple/scikit-build-core/", timeout=20).close()
        return True
    except OSError:
        return False


def test_pip_install_builds_the_package_and_it_runs(tmp_path):
    build = os.environ.get("OFFGEN_BUILD_DIR")
    if not build:
        pytest.skip("run by CTest, which names the build (OFFGEN_BUILD_DIR)")
    if os.environ.get("OFFGEN_TEST_PIP_INSTALL") == "0":
        pytest.skip("OFFGEN_TEST_PIP_INSTALL=0")
    if not pypi_reachable():
        pytest.skip("PyPI cannot be reached: pip cannot fetch scikit-build-core and pybind11")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # scikit-build-core configures the build for itself (its install prefix, PyPI's pybind11 in
    # its build environment): the cache is put back as it was, so nothing else rebuilds.
    cache = pathlib.Path(build) / "CMakeCache.txt"
    saved = cache.read_bytes()
    # scikit-build-core records the build environment it configured from (.skbuild-info.json);
    # finding one from another pip run (each has a new isolated environment) it deletes the
    # cache and configures afresh, without the preset's settings (OFFGEN_WERROR), so every
    # object's command changes and the engine builds twice (8.5 min on 2 cores). Without the
    # record it configures over the build's own cache: nothing but the module is touched.
    record = pathlib.Path(build) / ".skbuild-info.json"
    record.unlink(missing_ok=True)
    try:
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--no-cache-dir",
             f"--config-settings=build-dir={build}",
             "--config-settings=cmake.define.BUILD_TESTING=ON",
             f"--config-settings=cmake.define.Python_EXECUTABLE={sys.executable}", str(ROOT)],
            capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    finally:
        record.unlink(missing_ok=True)
        cache.write_bytes(saved)
        subprocess.run(["cmake", build], check=True, capture_output=True)
        subprocess.run(["cmake", "--build", build, "--target", "_offgen"], check=True,
                       capture_output=True)
    script = (
        "import offgen, pathlib, sys\n"
        "assert 'site-packages' in offgen.__file__, offgen.__file__\n"
        "llm = offgen.LLM(model=sys.argv[1], device='cpu', batch_size=2)\n"
        "[out] = llm.generate('In the beginning', offgen.SamplingParams(temperature=0, "
        "max_tokens=4, ignore_eos=True), use_tqdm=False)\n"
        "assert len(out.outputs[0].token_ids) == 4\n"
        "print(offgen.__version__)\n")
    ran = subprocess.run([str(python), "-c", script,
                          str(ROOT / "tests" / "data" / "golden" / "tiny-preln")],
                         capture_output=True, text=True, cwd=tmp_path,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert ran.stdout.strip() == "0.1.0"
