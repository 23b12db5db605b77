"""Where an object store's endpoint and credentials come from, never from a query spec.

In order, the first that gives a value wins, field by field:
1. the settings file's `store:` section (endpoint, region, access_key_id, secret_access_key);
2. the Airflow connection it names (`store.airflow_connection`, type aws: login is the access
   key, password the secret, extra's endpoint_url and region_name);
3. the environment: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from jobs.errors import StoreError
from jobs.runtime.airflow_connections import airflow_connection
from jobs.spec.model import StoreSettings


@dataclass(frozen=True)
class StoreAccess:
    endpoint: str
    region: str
    access_key_id: str
    secret_access_key: str

    def hadoop_conf(self, bucket: str) -> dict[str, str]:
        """The store for Hadoop's S3A file system (Spark's s3a:// URLs), set for one bucket so
        that buckets on different stores can sit side by side."""
        per_bucket = f"fs.s3a.bucket.{bucket}."
        return {
            per_bucket + "endpoint": self.endpoint,
            per_bucket + "endpoint.region": self.region,
            per_bucket + "access.key": self.access_key_id,
            per_bucket + "secret.key": self.secret_access_key,
            per_bucket + "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            per_bucket + "path.style.access": "true",
            per_bucket + "connection.ssl.enabled": str(self.endpoint.startswith("https")).lower(),
        }

    def delta_rs_options(self) -> dict[str, str]:
        """The store for delta-rs (its storage options)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_ALLOW_HTTP": str(self.endpoint.startswith("http:")).lower(),
            "AWS_S3_ADDRESSING_STYLE": "path",
        }


def store_access(settings: StoreSettings, where: str) -> StoreAccess:
    """The store's access for a run at `where` (an s3a:// URL, named in the error when a part is
    missing)."""
    sources = [_from_settings(settings), _from_airflow(settings.airflow_connection), _from_environment()]
    merged: dict[str, str] = {}
    for source in sources:
        for name, value in source.items():
            if value and name not in merged:
                merged[name] = value
    region = merged.get("region", "us-east-1")
    endpoint = merged.get("endpoint") or f"https://s3.{region}.amazonaws.com"
    missing = [name for name in ("access_key_id", "secret_access_key") if name not in merged]
    if missing:
        raise StoreError(
            f"no {' or '.join(missing)} for the object store at {endpoint}: set store.{missing[0]} in the "
            f"settings, an Airflow connection (store.airflow_connection) or AWS_ACCESS_KEY_ID and "
            f"AWS_SECRET_ACCESS_KEY",
            where=where,
        )
    return StoreAccess(endpoint.rstrip("/"), region, merged["access_key_id"], merged["secret_access_key"])


def _from_settings(settings: StoreSettings) -> dict[str, str | None]:
    return {
        "endpoint": settings.endpoint,
        "region": settings.region,
        "access_key_id": settings.access_key_id,
        "secret_access_key": settings.secret_access_key,
    }


def _from_airflow(conn_id: str | None) -> dict[str, str | None]:
    if not conn_id:
        return {}
    connection, extra = airflow_connection(conn_id, "store.airflow_connection", "the store", StoreError)
    return {
        "endpoint": extra.get("endpoint_url"),
        "region": extra.get("region_name"),
        "access_key_id": connection.login,
        "secret_access_key": connection.password,
    }


def _from_environment() -> dict[str, str | None]:
    return {
        "endpoint": os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        "access_key_id": os.environ.get("AWS_ACCESS_KEY_ID"),
        "secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY"),
    }
