"""Sources on the store are copied by ETag; run folders restored by hosts taking turns; the
store's access from an Airflow connection. Against the real S3 server, without Spark."""

from __future__ import annotations

import json
from pathlib import Path

from jobs.runtime.progress import Progress
from jobs.spec.model import Settings, StoreSettings
from jobs.store.access import store_access
from jobs.store.mirror import Mirror
from jobs.store.sources import SourceCopy, copy_sources
from jobs.store.url import StoreUrl


def _settings(work: Path) -> Settings:
    return Settings(store=StoreSettings(work_dir=work))


def test_a_source_copy_fetches_only_what_is_new_or_changed(store, bucket, prefix, tmp_path):
    url = StoreUrl(bucket, f"{prefix}/orders")
    copy = SourceCopy("orders", url, tmp_path / "copy")
    said: list[str] = []
    progress = Progress(emit=said.append)
    store.put(bucket, url.key("001.json"), b'{"op": "+I"}\n')
    store.put(bucket, url.key("date=2026-11-29/002.json"), b'{"op": "-D"}\n')
    copy_sources((copy,), _settings(tmp_path), progress)
    assert (copy.local / "date=2026-11-29" / "002.json").read_bytes() == b'{"op": "-D"}\n'
    assert "2 new or changed file(s)" in said[-1]

    store.put(bucket, url.key("001.json"), b'{"op": "+I"}\n{"op": "-U"}\n')  # changed on the store
    store.delete(bucket, url.key("date=2026-11-29/002.json"))
    copy_sources((copy,), _settings(tmp_path), progress)
    assert "1 new or changed file(s)" in said[-1] and "1 gone from the store removed" in said[-1]
    assert (copy.local / "001.json").read_bytes().count(b"\n") == 2
    assert not (copy.local / "date=2026-11-29" / "002.json").exists()


def test_hosts_taking_turns_each_restore_the_others_commit(store, bucket, prefix, tmp_path):
    run = StoreUrl(bucket, f"{prefix}/q")
    first, second = Mirror(store, run, tmp_path / "a" / "q"), Mirror(store, run, tmp_path / "b" / "q")
    for turn in range(4):
        host = (first, second)[turn % 2]
        previous = host.restore()
        host.begin(previous)
        point = host.root / "_state" / "point.json"
        before = json.loads(point.read_text())["turn"] if point.exists() else -1
        assert before == turn - 1  # the other host's commit, not this host's stale copy
        point.parent.mkdir(parents=True, exist_ok=True)
        point.write_text(json.dumps({"turn": turn}))
        host.commit(previous, lambda: True)


def test_an_airflow_connection_of_type_aws_gives_the_store(monkeypatch):
    extra = {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"}
    connection = {"conn_type": "aws", "login": "airflow-key", "password": "airflow-secret", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE_S3", json.dumps(connection))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-the-environment")
    access = store_access(StoreSettings(airflow_connection="lakehouse_s3"), "s3a://b/runs")
    assert (access.endpoint, access.region, access.access_key_id, access.secret_access_key) == (
        "http://127.0.0.1:9000",
        "eu-west-1",
        "airflow-key",
        "airflow-secret",
    )


def test_a_step_on_a_clean_working_copy_hashes_only_the_files_it_wrote(store, bucket, prefix, tmp_path, monkeypatch):
    from jobs.store import mirror as mirror_module

    mirror = Mirror(store, StoreUrl(bucket, f"{prefix}/q"), tmp_path / "w" / "q")
    for name in ("a", "b", "c"):
        (mirror.root / "_state").mkdir(parents=True, exist_ok=True)
        (mirror.root / "_state" / name).write_text(name)
    mirror.commit(None, lambda: True)
    restored = mirror.restore()  # the copy the last step left clean: nothing downloaded
    mirror.begin(restored)
    (mirror.root / "_state" / "d").write_text("d")
    hashed: list[str] = []
    real = mirror_module._sha256
    monkeypatch.setattr(mirror_module, "_sha256", lambda path: hashed.append(path.name) or real(path))
    mirror.commit(restored, lambda: True)
    assert hashed == ["d"]
