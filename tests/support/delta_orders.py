"""An `orders` Delta table as another tool leaves it, for the tests of a Delta source on the store."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake


def write_orders_table(location: str, storage_options: dict | None = None) -> None:
    """Versions 0 to 2 at `location` (a path or an s3:// URL): three orders, then order 1's income
    updated, then order 2 deleted; the change data feed on."""
    rows = pa.table({"order_id": [1, 2, 3], "pId": [1, 1, 2], "income": [5, 3, 8]})
    write_deltalake(
        location, rows, configuration={"delta.enableChangeDataFeed": "true"}, storage_options=storage_options
    )
    DeltaTable(location, storage_options=storage_options).update(predicate="order_id = 1", updates={"income": "7"})
    DeltaTable(location, storage_options=storage_options).delete("order_id = 2")


def store_options(environment: dict[str, str]) -> dict[str, str]:
    """delta-rs's storage options for the local S3 server whose variables `environment` holds (one
    writer: the unsafe rename is the test's own table)."""
    return {
        **environment,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ADDRESSING_STYLE": "path",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
