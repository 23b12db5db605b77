"""ObjectStore: the few S3 calls a run folder needs, over HTTP (path-style), each failure one line.

A request that cannot reach the store is tried three times over about a second, then raised as a
StoreError naming the endpoint: a store that is down ends the step with exit 2, not a hang.
"""

from __future__ import annotations

import hashlib
import os
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx

from jobs.errors import StoreError
from jobs.store.access import StoreAccess
from jobs.store.signing import EMPTY_SHA256, signed_headers

_S3 = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_ATTEMPTS = (0.2, 0.8)  # pauses between the three tries of a request that did not reach the store
# Pauses between the tries of a request the store answered with a server error (500, 502, 503,
# 504: busy, or a server still coming up), backing off as S3's clients do.
_BUSY_ATTEMPTS = (0.25, 0.5, 1.0, 2.0, 4.0)
_BUSY = {500, 502, 503, 504}
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Listed:
    key: str
    size: int
    etag: str = ""
    modified: float = 0.0  # seconds since the epoch (the store's Last-Modified)


Listing = tuple[list[Listed], list[str]]  # objects, and the sub-folders a delimited listing names


class ObjectStore:
    def __init__(self, access: StoreAccess):
        self.access = access
        parts = urlsplit(access.endpoint)
        self._host = parts.netloc
        self._client = httpx.Client(base_url=access.endpoint, timeout=httpx.Timeout(60.0, connect=5.0))
        self.requests = 0  # requests sent, for the per-micro-batch cost (docs/object-storage.md)
        self.bytes_put = 0

    def close(self) -> None:
        self._client.close()

    def check_bucket(self, bucket: str) -> None:
        """A HEAD of the bucket: the cheapest call that proves the endpoint, the credentials and
        the bucket before anything else runs."""
        response = self._send("HEAD", bucket, "")
        if response.status_code == 404:
            raise StoreError(f"no bucket {bucket!r} at {self.access.endpoint}", where=f"s3a://{bucket}")
        self._raise_for(response, f"s3a://{bucket}")

    def get(self, bucket: str, key: str) -> bytes | None:
        response = self._send("GET", bucket, key)
        if response.status_code == 404:
            return None
        self._raise_for(response, f"s3a://{bucket}/{key}")
        return response.content

    def put(self, bucket: str, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        """Write an object whole (a PUT is never half seen). With if_absent, only if no object
        has the key (If-None-Match: *): False when one has."""
        headers = {"if-none-match": "*"} if if_absent else {}
        response = self._send("PUT", bucket, key, data=data, headers=headers)
        self.bytes_put += len(data)
        if if_absent and response.status_code in (409, 412):
            return False
        self._raise_for(response, f"s3a://{bucket}/{key}")
        return True

    def put_file(self, bucket: str, key: str, path: Path) -> None:
        self.put(bucket, key, path.read_bytes())

    def get_file(self, bucket: str, key: str, path: Path) -> None:
        data = self.get(bucket, key)
        if data is None:
            raise StoreError(f"object missing from {self.access.endpoint}", where=f"s3a://{bucket}/{key}")
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        partial.write_bytes(data)
        os.replace(partial, path)  # the local working folder is a POSIX disk

    def head(self, bucket: str, key: str) -> Listed | None:
        """An object's size and time, None when no object has the key."""
        response = self._send("HEAD", bucket, key)
        if response.status_code == 404:
            return None
        self._raise_for(response, f"s3a://{bucket}/{key}")
        headers = response.headers
        modified = parsedate_to_datetime(headers["last-modified"]).timestamp()
        return Listed(key, int(headers.get("content-length", 0)), headers.get("etag", "").strip('"'), modified)

    def delete(self, bucket: str, key: str) -> None:
        response = self._send("DELETE", bucket, key)
        if response.status_code != 404:
            self._raise_for(response, f"s3a://{bucket}/{key}")

    def list(self, bucket: str, prefix: str) -> list[Listed]:
        """Every object under the prefix, at any depth."""
        return self._listing(bucket, prefix)[0]

    def children(self, bucket: str, folder: str) -> Listing:
        """The objects directly in a folder (a prefix ending in /) and the names of its
        sub-folders: a listing with "/" as the delimiter."""
        return self._listing(bucket, folder, delimiter="/")

    def any_under(self, bucket: str, prefix: str) -> bool:
        """Whether an object's key starts with the prefix: one listing of one key."""
        return bool(self._listing(bucket, prefix, limit=1)[0])

    def _listing(self, bucket: str, prefix: str, *, delimiter: str | None = None, limit: int | None = None) -> Listing:
        listing: Listing = ([], [])
        objects, folders = listing
        token: str | None = None
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if delimiter:
                query["delimiter"] = delimiter
            if limit:
                query["max-keys"] = str(limit)
            if token:
                query["continuation-token"] = token
            response = self._send("GET", bucket, "", query=query)
            self._raise_for(response, f"s3a://{bucket}/{prefix}")
            root = ElementTree.fromstring(response.content)
            objects.extend(_listed(item) for item in root.iter(f"{_S3}Contents"))
            folders.extend(p.findtext(f"{_S3}Prefix", "") for p in root.iter(f"{_S3}CommonPrefixes"))
            if limit or root.findtext(f"{_S3}IsTruncated") != "true":
                return listing
            token = root.findtext(f"{_S3}NextContinuationToken")

    def _send(
        self,
        method: str,
        bucket: str,
        key: str,
        *,
        data: bytes = b"",
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> httpx.Response:
        for pause in (*_BUSY_ATTEMPTS, None):
            response = self._reach(method, bucket, key, data=data, headers=headers, query=query)
            if response.status_code not in _BUSY or pause is None:
                return response
            time.sleep(pause)
        raise AssertionError("unreachable")

    def _reach(
        self,
        method: str,
        bucket: str,
        key: str,
        *,
        data: bytes,
        headers: dict[str, str] | None,
        query: dict[str, str] | None,
    ) -> httpx.Response:
        path = f"/{bucket}/{key}" if key else f"/{bucket}"
        query = query or {}
        for pause in (*_ATTEMPTS, None):
            signed = signed_headers(
                method,
                self._host,
                path,
                query,
                headers or {},
                hashlib.sha256(data).hexdigest() if data else EMPTY_SHA256,
                access_key=self.access.access_key_id,
                secret_key=self.access.secret_access_key,
                region=self.access.region,
            )
            try:
                self.requests += 1
                return self._client.request(
                    method, quote(path, safe="/-_.~"), params=query, content=data or None, headers=signed
                )
            except httpx.TransportError as exc:
                if pause is None:
                    raise StoreError(
                        f"cannot reach the object store at {self.access.endpoint} ({type(exc).__name__})",
                        where=f"s3a://{bucket}/{key}",
                    ) from None
                time.sleep(pause)
        raise AssertionError("unreachable")

    def _raise_for(self, response: httpx.Response, where: str) -> None:
        if response.status_code < 300:
            return
        code = _error_code(response)
        if response.status_code == 403:
            raise StoreError(
                f"the object store at {self.access.endpoint} refused the credentials of access key "
                f"{self.access.access_key_id!r} ({code or 'AccessDenied'})",
                where=where,
            )
        raise StoreError(
            f"the object store at {self.access.endpoint} answered {response.status_code} {code or ''}".rstrip(),
            where=where,
        )


def _listed(item: ElementTree.Element) -> Listed:
    modified = item.findtext(f"{_S3}LastModified", "")
    return Listed(
        item.findtext(f"{_S3}Key", ""),
        int(item.findtext(f"{_S3}Size", "0")),
        item.findtext(f"{_S3}ETag", "").strip('"'),
        datetime.fromisoformat(modified.replace("Z", "+00:00")).timestamp() if modified else 0.0,
    )


def _error_code(response: httpx.Response) -> str | None:
    try:
        return ElementTree.fromstring(response.content).findtext("Code")
    except ElementTree.ParseError:
        return None
