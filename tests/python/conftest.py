"""Fixtures of the Python package's tests: the checkpoints they run and the CLI they compare with.
CTest runs them with the build tree's package on PYTHONPATH and OFFGEN_BIN naming its offgen."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "golden" / "tiny-preln"  # 2 layers, 64 positions, own tokenizer


def smollm2_path():
    env = os.environ.get("OFFGEN_SMOLLM2_GGUF")
    path = pathlib.Path(env) if env else ROOT / ".cache" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@pytest.fixture(scope="session")
def tiny():
    return str(TINY)


@pytest.fixture(scope="session")
def smollm2():
    path = smollm2_path()
    if path is None:
        pytest.skip("SmolLM2-135M-Instruct is not fetched: run scripts/fetch-model, or set "
                    "OFFGEN_SMOLLM2_GGUF")
    return str(path)


def offgen_bin():
    path = os.environ.get("OFFGEN_BIN") or str(ROOT / "build" / "ci" / "bin" / "offgen")
    if not pathlib.Path(path).is_file():
        pytest.skip(f"the offgen binary is not built ({path})")
    return path


def run_cli(command, flags, lines, tmp_path, extra=()):
    """Runs `offgen <command>` over `lines` (dicts) and returns its records in input order."""
    source = tmp_path / f"{command}-in.jsonl"
    target = tmp_path / f"{command}-out.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = subprocess.run([offgen_bin(), command, *flags, "--input", str(source), "--output",
                           str(target), "--overwrite", *extra], capture_output=True, text=True)
    assert done.returncode in (0, 2), done.stderr
    return [json.loads(line) for line in target.read_text().splitlines()]


def without_times(record):
    """A generate record without what differs between two runs of it: the creation time."""
    record = json.loads(json.dumps(record))
    body = (record.get("response") or {}).get("body")
    if isinstance(body, dict):
        body.pop("created", None)
    return record
