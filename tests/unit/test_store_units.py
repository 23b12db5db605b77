"""The object store's pieces that need no server: request signing, URLs, where access comes
from, and where a cluster master reaches a run folder on a store."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobs.errors import StoreError
from jobs.pipeline import Pipeline
from jobs.spec.model import StoreSettings
from jobs.store.access import store_access
from jobs.store.signing import EMPTY_SHA256, signed_headers
from jobs.store.url import StoreUrl
from tests.conftest import orders_spec


def test_the_signature_of_awss_published_get_object_example():
    # The GET Object example of AWS's Signature Version 4 documentation for S3, and its signature.
    headers = signed_headers(
        "GET",
        "examplebucket.s3.amazonaws.com",
        "/test.txt",
        {},
        {"Range": "bytes=0-9"},
        EMPTY_SHA256,
        access_key="AKIAIOSFODNN7EXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        region="us-east-1",
        now=datetime(2013, 5, 24, tzinfo=UTC),
    )
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def test_urls_keep_bucket_and_prefix():
    url = StoreUrl.parse("s3a://bucket/runs/")
    assert (url.bucket, url.prefix, url.key("q/report.json"), str(url.child("q"))) == (
        "bucket",
        "runs",
        "runs/q/report.json",
        "s3a://bucket/runs/q",
    )
    with pytest.raises(StoreError, match="expected s3a://bucket/prefix"):
        StoreUrl.parse("s3a:///runs")


def test_settings_win_over_the_environment_field_by_field(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env:1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    access = store_access(StoreSettings(access_key_id="file-key"), "s3a://b")
    assert (access.endpoint, access.access_key_id, access.secret_access_key) == (
        "http://env:1",
        "file-key",
        "env-secret",
    )


def test_missing_credentials_are_one_line_naming_where_to_set_them(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(StoreError, match="no access_key_id or secret_access_key .* AWS_ACCESS_KEY_ID"):
        store_access(StoreSettings(), "s3a://b/runs")


def test_a_cluster_master_with_a_changelog_folder_on_a_store_and_a_local_run_folder_is_refused(tmp_path):
    spec = orders_spec(tmp_path, "SELECT pId FROM orders", source={"path": "s3a://b/orders"})
    with pytest.raises(StoreError, match="a cluster's executors .* cannot see") as refused:
        Pipeline.open(spec, runs_dir=tmp_path / "runs", master="spark://127.0.0.1:7077")
    assert refused.value.where == "s3a://b/orders"


def test_under_a_cluster_master_spark_reaches_a_store_run_folder_at_its_own_keys(monkeypatch):
    """The executors cannot see the driver's working copy: Spark's areas are the run folder's
    keys, its S3A settings are in Spark's, and lockstep's own files stay in the working copy."""
    for name, value in {
        "AWS_ENDPOINT_URL": "http://store:1",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
    }.items():
        monkeypatch.setenv(name, value)
    pipeline = Pipeline.open(
        "conf/queries/seed_000_dedup.yaml", runs_dir="s3a://b/runs", master="spark://127.0.0.1:7077"
    )
    layout, run = pipeline.layout, "s3a://b/runs/seed_000_dedup"
    assert str(layout.checkpoint) == f"{run}/_state/checkpoint"
    assert str(layout.for_stage("stage1_dedup").stream) == f"{run}/stages/stage1_dedup/stream"
    assert str(layout.for_spark(layout.staged("shipments"))) == f"{run}/_state/staged/shipments"
    assert layout.batches_log == pipeline.layout.root / "_state" / "batches.jsonl"  # the working copy's
    assert pipeline.settings.spark.extra["spark.hadoop.fs.s3a.bucket.b.endpoint"] == "http://store:1"


def test_the_delta_rs_writer_with_a_cluster_master_and_a_run_folder_on_a_store_is_refused(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StoreError, match="use --writer delta-spark") as refused:
        Pipeline.open(
            "conf/queries/income_per_product.yaml",
            runs_dir="s3a://b/runs",
            master="spark://127.0.0.1:7077",
            writer="delta-rs",
        )
    assert refused.value.where == "s3a://b/runs/income_per_product"
