"""The driver JVM's compilers follow the size of the run's input: C1 alone under the setting's
MiB, the JVM's default otherwise, when the size is unknown, or when the setting is 0."""

import subprocess

import pytest

from jobs.runtime.jit import QUICK_ONLY, files_bytes, jit_options

MIB = 2**20


@pytest.mark.parametrize(
    "input_bytes, below_mib, quick",
    [
        (0, 256, True),
        (256 * MIB - 1, 256, True),
        (256 * MIB, 256, False),
        (10 * 2**30, 256, False),
        (None, 256, False),  # a session started without knowing its input (Airflow, the tests)
        (1, 0, False),  # 0: never
    ],
)
def test_c1_alone_only_for_a_known_small_input(input_bytes, below_mib, quick):
    assert (jit_options(input_bytes, below_mib) == QUICK_ONLY) is quick
    assert jit_options(input_bytes, below_mib) in ("", QUICK_ONLY)


def test_the_input_is_every_file_under_the_sources(tmp_path):
    (tmp_path / "a" / "2026-11-27").mkdir(parents=True)
    (tmp_path / "a" / "2026-11-27" / "001.json").write_bytes(b"x" * 300)
    (tmp_path / "a" / "002.json").write_bytes(b"x" * 20)
    (tmp_path / "b.json").write_bytes(b"x" * 5)
    assert files_bytes([tmp_path / "a", tmp_path / "b.json", tmp_path / "absent"]) == 325
    assert files_bytes([]) == 0


def test_the_jvm_takes_the_option(java):
    done = subprocess.run([java, QUICK_ONLY, "-version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
