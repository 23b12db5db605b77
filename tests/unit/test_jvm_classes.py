"""The driver JVM's class archive is a cache: used when setup made one, written only by the
training run, and a damaged or foreign archive neither stops the JVM nor prints anything."""

import subprocess

from jobs.runtime import jvm_classes


def test_no_archive_means_no_option(tmp_path, monkeypatch):
    monkeypatch.delenv(jvm_classes.DUMP_TO, raising=False)
    assert jvm_classes.java_options(tmp_path / "absent.jsa") == ""


def test_an_archive_setup_made_is_used(tmp_path, monkeypatch):
    monkeypatch.delenv(jvm_classes.DUMP_TO, raising=False)
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"x")
    assert f"-XX:SharedArchiveFile={archive}" in jvm_classes.java_options(archive).split()


def test_the_training_run_writes_instead_of_reading(tmp_path, monkeypatch):
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"x")
    monkeypatch.setenv(jvm_classes.DUMP_TO, str(tmp_path / "new.jsa"))
    options = jvm_classes.java_options(archive).split()
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in options
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in options)


def test_a_damaged_archive_is_ignored_silently(java, tmp_path, monkeypatch):
    monkeypatch.delenv(jvm_classes.DUMP_TO, raising=False)
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"not a class archive" * 100)
    options = jvm_classes.java_options(archive).split()
    done = subprocess.run([java, *options, "-version"], capture_output=True, text=True)
    assert done.returncode == 0
    assert "cds" not in done.stdout.lower() + done.stderr.lower()
    assert "archive" not in done.stdout.lower() + done.stderr.lower()
