"""An object-store URL, `s3a://bucket/prefix` (Hadoop's S3A scheme; `s3://` is read the same)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jobs.errors import StoreError

SCHEMES = ("s3a://", "s3://")


def is_store_url(text: object) -> bool:
    return isinstance(text, str) and text.startswith(SCHEMES)


def runs_location(value: str | Path) -> str | Path:
    """A runs folder as given: an object store's URL stays a string (a Path would fold its
    `//`), anything else is a local path."""
    text = str(value) if not isinstance(value, Path) else value
    return text if is_store_url(text) else Path(value)


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
