"""lockstep's Hadoop local file system (jobs/runtime/local_fs.py): the session's `file:` paths go
through it, and the files and folders it creates get the modes Hadoop's own class gives them."""

from __future__ import annotations

import os
import stat

import pytest

from jobs.runtime.local_fs import FILE_SYSTEM, JAR, local_fs_conf


def _file_systems(spark, folder):
    """The session's file system for `folder`, and Hadoop's own local file system beside it."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    ours = jvm.org.apache.hadoop.fs.Path(str(folder)).getFileSystem(conf)
    hadoops = jvm.org.apache.hadoop.fs.LocalFileSystem()
    hadoops.initialize(jvm.java.net.URI("file:///"), conf)
    return ours, hadoops


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_sessions_local_file_system_is_lockstep_s(spark):
    assert JAR.is_file(), "setup builds the jar (scripts/jvm-jars.sh)"
    ours, _ = _file_systems(spark, "/tmp")
    assert ours.getClass().getName() == FILE_SYSTEM


def test_files_and_folders_get_the_modes_hadoop_s_own_class_gives(spark, tmp_path):
    jvm = spark._jvm
    ours, hadoops = _file_systems(spark, tmp_path)
    modes = {}
    for name, fs in (("ours", ours), ("hadoop", hadoops)):
        root = tmp_path / name
        fs.mkdirs(jvm.org.apache.hadoop.fs.Path(str(root / "a" / "b")))
        fs.create(jvm.org.apache.hadoop.fs.Path(str(root / "a" / "b" / "log"))).close()
        (root / "set").mkdir()
        (root / "set" / "file").write_text("")
        for target, octal in (("set/file", "640"), ("set", "1777")):  # the sticky bit: chmod's way
            fs.setPermission(
                jvm.org.apache.hadoop.fs.Path(str(root / target)),
                jvm.org.apache.hadoop.fs.permission.FsPermission(octal),
            )
        modes[name] = {str(p.relative_to(root)): _mode(p) for p in sorted(root.rglob("*"))}
    assert modes["ours"] == modes["hadoop"]
    assert modes["ours"]["set"] == 0o1777 and modes["ours"]["set/file"] == 0o640
    assert modes["ours"]["a/b/.log.crc"] == modes["ours"]["a/b/log"]


def test_no_jar_or_a_class_of_the_settings_own_leaves_hadoop_s(tmp_path):
    assert local_fs_conf({}, on_cluster=False, jar=tmp_path / "missing.jar") == {}
    jar = tmp_path / "local-fs.jar"
    jar.write_bytes(b"")
    assert local_fs_conf({"spark.hadoop.fs.file.impl": "theirs"}, on_cluster=True, jar=jar) == {}


@pytest.mark.parametrize("on_cluster", [False, True])
def test_the_jar_joins_the_class_paths_the_settings_give(tmp_path, on_cluster):
    jar = tmp_path / "local-fs.jar"
    jar.write_bytes(b"")
    conf = local_fs_conf({"spark.driver.extraClassPath": "/opt/theirs.jar"}, on_cluster, jar=jar)
    assert conf["spark.hadoop.fs.file.impl"] == FILE_SYSTEM
    assert conf["spark.driver.extraClassPath"] == f"{jar}{os.pathsep}/opt/theirs.jar"
    assert conf.get("spark.executor.extraClassPath") == (str(jar) if on_cluster else None)
