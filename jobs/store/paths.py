"""StorePath: a file or folder under an s3a:// URL, with the part of pathlib's interface that
lockstep's run-folder code uses, so the same code reads and writes a local folder or the store.

What differs from a local disk, and how it is kept:
- A write is one PUT, never half seen: `write_bytes` is already what a write to a temporary file
  and a rename is on a POSIX disk (`replace_whole` in jobs/store/files.py picks either).
- Folders are prefixes: `mkdir` does nothing, a folder exists while an object is under it.
- An object's time is the store's (when it was written, to the second), and cannot be set.

A StorePath pickles without its HTTP client: a Spark task on an executor opens its own, from the
access the path carries.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from jobs.errors import StoreError
from jobs.store.access import StoreAccess
from jobs.store.client import ObjectStore
from jobs.store.url import StoreUrl

_CLIENTS: dict[tuple[int, StoreAccess], ObjectStore] = {}


def client_for(access: StoreAccess) -> ObjectStore:
    """This process's client for a store (a forked Spark worker opens its own)."""
    held = (os.getpid(), access)
    if held not in _CLIENTS:
        _CLIENTS[held] = ObjectStore(access)
    return _CLIENTS[held]


class StoreStat(NamedTuple):
    st_size: int
    st_mtime: float

    @property
    def st_mtime_ns(self) -> int:
        return int(self.st_mtime * 1e9)


@dataclass(frozen=True)
class StorePath:
    url: StoreUrl
    access: StoreAccess

    @classmethod
    def of(cls, url: str, access: StoreAccess) -> StorePath:
        return cls(StoreUrl.parse(url), access)

    def __str__(self) -> str:
        return str(self.url)

    def __truediv__(self, part: str) -> StorePath:
        return StorePath(self.url.child(str(part)), self.access)

    @property
    def name(self) -> str:
        return self.url.prefix.rpartition("/")[2]

    @property
    def suffix(self) -> str:
        stem, dot, ext = self.name.rpartition(".")
        return f".{ext}" if dot and stem else ""

    @property
    def stem(self) -> str:
        return self.name[: len(self.name) - len(self.suffix)]

    @property
    def parent(self) -> StorePath:
        return StorePath(StoreUrl(self.url.bucket, self.url.prefix.rpartition("/")[0]), self.access)

    @property
    def storage_options(self) -> dict[str, str]:
        """delta-rs's options for this store (jobs/runtime/delta.py's open_delta)."""
        return self.access.delta_rs_options()

    def with_name(self, name: str) -> StorePath:
        return self.parent / name

    @property
    def _store(self) -> ObjectStore:
        return client_for(self.access)

    @property
    def _key(self) -> str:
        return self.url.key()

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def is_file(self) -> bool:
        return bool(self._key) and self._store.head(self.url.bucket, self._key) is not None

    def is_dir(self) -> bool:
        return self._store.any_under(self.url.bucket, self._folder_key)

    @property
    def _folder_key(self) -> str:
        return f"{self._key}/" if self._key else ""

    def iterdir(self) -> Iterator[StorePath]:
        folder = self._folder_key
        files, folders = self._store.children(self.url.bucket, folder)
        names = [f.key[len(folder) :] for f in files] + [p[len(folder) :].rstrip("/") for p in folders]
        return iter([self / n for n in sorted(set(names)) if n])

    def glob(self, pattern: str) -> Iterator[StorePath]:
        """The children whose names match (one level: lockstep globs no deeper)."""
        if "/" in pattern:
            raise ValueError(f"StorePath.glob matches names in one folder, not {pattern!r}")
        return iter([p for p in self.iterdir() if fnmatch.fnmatchcase(p.name, pattern)])

    def stat(self) -> StoreStat:
        head = self._store.head(self.url.bucket, self._key)
        if head is None:
            raise FileNotFoundError(str(self))
        return StoreStat(head.size, head.modified)

    def read_bytes(self) -> bytes:
        data = self._store.get(self.url.bucket, self._key)
        if data is None:
            raise FileNotFoundError(str(self))
        return data

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> int:
        if not self._key:
            raise StoreError("cannot write a bucket's root as a file", where=str(self))
        self._store.put(self.url.bucket, self._key, data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to make: a folder is the prefix of the objects under it."""

    def unlink(self, missing_ok: bool = False) -> None:
        if not missing_ok and not self.is_file():
            raise FileNotFoundError(str(self))
        self._store.delete(self.url.bucket, self._key)

    def remove_tree(self) -> None:
        """Every object under this folder (shutil.rmtree's part on a local disk)."""
        for listed in self._store.list(self.url.bucket, self._folder_key):
            self._store.delete(self.url.bucket, listed.key)
