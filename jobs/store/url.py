"""An object-store URL, `s3a://bucket/prefix` (Hadoop's S3A scheme; `s3://` is read the same): its
bucket and key prefix."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.errors import StoreError
from jobs.spec.locations import SCHEMES, is_store_url, location

__all__ = ["SCHEMES", "StoreUrl", "is_store_url", "location"]


@dataclass(frozen=True)
class StoreUrl:
    bucket: str
    prefix: str  # no leading or trailing slash; "" for the bucket's root

    @classmethod
    def parse(cls, text: str) -> StoreUrl:
        rest = next((text[len(s) :] for s in SCHEMES if text.startswith(s)), None)
        bucket, _, prefix = (rest or "").partition("/")
        if rest is None or not bucket:
            raise StoreError("not an object-store URL: expected s3a://bucket/prefix", where=text)
        return cls(bucket, prefix.strip("/"))

    def child(self, *parts: str) -> StoreUrl:
        joined = "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))
        return StoreUrl(self.bucket, joined)

    def key(self, relative: str = "") -> str:
        """The object key of a path under this URL."""
        return "/".join(p for p in (self.prefix, relative.strip("/")) if p)

    def __str__(self) -> str:
        return f"s3a://{self.bucket}/{self.prefix}" if self.prefix else f"s3a://{self.bucket}"
