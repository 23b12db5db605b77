"""A run folder's files between a step's local working copy and the object store.

What the store holds under a run folder's URL (docs/object-storage.md):

  _commits/<n>.json   commit records: every file of the run folder, with its SHA-256, its size,
                      the key its content is at and its modification time; the newest record is
                      the run folder
  _blobs/<sha256>     the content of lockstep's own files (`_state/`) and of every file that
                      can change (report.json, Data Docs, a Delta log's entries), by content
  stream/, batch/ …   the Delta tables and reports at their own keys, for anyone to read
  _state/staged/<source>/segments/
                      the staged segments at their own keys, where a cluster's executors read
                      them

A step commits by writing the next record with If-None-Match: *; there is no rename. Content is
uploaded first, so a record never names a missing object: a step killed before the record leaves
the newest record as it was, and the objects it wrote are never read. After the record, the Delta
log entries it adds are published at their own keys, each only if absent (Delta's protocol for a
store with put-if-absent), in version order: a reader of a table sees a version once its data is
there. A step killed while publishing is finished by the next restore, from the record's blobs.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from jobs.errors import StoreError
from jobs.store.client import ObjectStore
from jobs.store.url import StoreUrl

# Fault injection for the tests: exit the process right after the commit record is written, before
# the Delta log entries it adds are published (the next restore must finish publishing them).
FAULT_AFTER_RECORD = "LOCKSTEP_FAULT_AFTER_STORE_RECORD"
COMMITS = "_commits"
BLOBS = "_blobs"
PRIVATE = "_state/"
_KEEP = 2  # commit records kept: the newest and the one before, whose blobs it may share


@dataclass
class Entry:
    sha256: str
    size: int
    key: str  # the object key, relative to the run folder's URL
    # The file's modification time, restored with it: Spark's file source orders the staged
    # segments by it and forgets files older than its newest by more than a week, so a segment
    # restored with today's time would be read again. Also, with the size, how the working copy
    # knows an unchanged file without hashing it again.
    mtime_ns: int = 0

    def record(self) -> list:
        return [self.sha256, self.size, self.key, self.mtime_ns]


@dataclass
class Commit:
    number: int
    files: dict[str, Entry] = field(default_factory=dict)
    publish: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, number: int, data: bytes) -> Commit:
        body = json.loads(data)
        files = {rel: Entry(*values) for rel, values in body["files"].items()}
        return cls(number, files, body.get("publish", []))


@dataclass(frozen=True)
class Mirror:
    store: ObjectStore
    run: StoreUrl
    root: Path  # the local working copy

    @property
    def marker(self) -> Path:
        """Beside the working copy: which commit it is, whether a step has changed it since, and
        each file's hash by size and mtime."""
        return self.root.with_name(f".{self.root.name}.store.json")

    # reading -------------------------------------------------------------------------------

    def newest(self) -> Commit | None:
        numbers = self._commit_numbers()
        if not numbers:
            return None
        data = self.store.get(self.run.bucket, self._commit_key(numbers[-1]))
        if data is None:
            raise StoreError("a commit record vanished while being read", where=str(self.run))
        return Commit.parse(numbers[-1], data)

    def restore(self) -> Commit | None:
        """Make the working copy the newest commit's run folder; files already there with the
        same hash are kept, so a working copy a step left clean costs one listing."""
        commit = self.newest()
        marker = self._read_marker()
        number = commit.number if commit else 0
        if marker.get("commit") == number and marker.get("clean") and (self.root.exists() or not commit):
            if commit:
                _known_mtimes(commit, marker.get("files", {}))  # so the commit hashes only what changes
                if not marker.get("published"):
                    self._publish(commit)
                    self._write_marker(number, commit.files, clean=True, published=True)
            return commit
        wanted = commit.files if commit else {}
        local = self._scan({})
        for rel in set(local) - set(wanted):
            (self.root / rel).unlink()
        _remove_empty_folders(self.root)  # an empty _delta_log would pass for a table
        for rel, entry in wanted.items():
            have, path = local.get(rel), self.root / rel
            if have is None or have.sha256 != entry.sha256:
                self.store.get_file(self.run.bucket, self.run.key(entry.key), path)
            if entry.mtime_ns and path.stat().st_mtime_ns != entry.mtime_ns:
                os.utime(path, ns=(entry.mtime_ns, entry.mtime_ns))
            entry.mtime_ns = path.stat().st_mtime_ns
        self.root.mkdir(parents=True, exist_ok=True)
        if commit:
            self._publish(commit)
        self._write_marker(number, wanted, clean=True, published=True)
        return commit

    # writing -------------------------------------------------------------------------------

    def begin(self, commit: Commit | None) -> None:
        """A step is about to change the working copy: until it commits, the copy is not the
        commit's, and a restore after a crash must not trust it."""
        self._write_marker(commit.number if commit else 0, commit.files if commit else {}, clean=False)

    def commit(self, previous: Commit | None, still_holds, *, prune: bool = True) -> Commit | None:
        """Upload what changed and write the next commit record; `still_holds()` is asked just
        before the record, so a writer whose lease lapsed does not commit. A working copy the
        same as `previous` writes no record (None). `prune`: remove the records before the
        newest two and the blobs only they name (a step's commits after each micro-batch leave
        that to its last commit)."""
        before = previous.files if previous else {}
        files = self._scan(self._read_marker().get("files", {}))
        if previous and {r: e.sha256 for r, e in files.items()} == {r: e.sha256 for r, e in before.items()}:
            self._write_marker(previous.number, files, clean=True)
            if prune:
                self._prune(previous)
            return None
        tables = _delta_tables(files)
        publish: list[str] = []
        stored_blobs = {e.key for e in before.values() if e.key.startswith(BLOBS)}
        # In name order: a folder's staged segments reach the store in changelog order.
        for rel, entry in sorted(files.items()):
            old = before.get(rel)
            try:
                if old is not None and old.sha256 == entry.sha256:
                    entry.key = old.key
                elif _is_table_data(rel, tables) or _is_segment(rel):
                    entry.key = rel
                    self.store.put_file(self.run.bucket, self.run.key(rel), self.root / rel)
                else:
                    entry.key = f"{BLOBS}/{entry.sha256}"
                    if entry.key not in stored_blobs:
                        self.store.put_file(self.run.bucket, self.run.key(entry.key), self.root / rel)
                        stored_blobs.add(entry.key)
            except FileNotFoundError:  # a temporary file of Spark's, gone since the scan
                del files[rel]
                continue
            if not rel.startswith(PRIVATE) and (old is None or old.sha256 != entry.sha256) and entry.key != rel:
                publish.append(rel)
        self._drop_unlisted_segments(files, before)
        commit = Commit((previous.number if previous else 0) + 1, files, sorted(publish, key=_publish_order))
        self._write_record(commit, still_holds)
        self._write_marker(commit.number, files, clean=True, published=False)
        if os.environ.get(FAULT_AFTER_RECORD):
            os._exit(71)
        self._publish(commit)
        self._write_marker(commit.number, files, clean=True, published=True)
        if prune:
            self._prune(commit)
        return commit

    def _drop_unlisted_segments(self, files: dict[str, Entry], before: dict[str, Entry]) -> None:
        """A segment folder that gets new segments loses those at its keys that the commit does
        not list: a staging that was never committed left them, and Spark's file source, which
        lists the folder, would read them."""
        folders = {rel.rsplit("/", 1)[0] for rel in files if _is_segment(rel) and rel not in before}
        for folder in sorted(folders):
            for listed in self.store.list(self.run.bucket, self.run.key(folder) + "/"):
                if listed.key[len(self.run.key()) :].lstrip("/") not in files:
                    self.store.delete(self.run.bucket, listed.key)

    def _write_record(self, commit: Commit, still_holds) -> None:
        if not still_holds():
            raise StoreError(
                "this step's lease on the run folder lapsed (another writer may have taken it); nothing was committed",
                where=str(self.run),
            )
        body = json.dumps(
            {
                "commit": commit.number,
                "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": {rel: e.record() for rel, e in sorted(commit.files.items())},
                "publish": commit.publish,
            }
        ).encode()
        if not self.store.put(self.run.bucket, self._commit_key(commit.number), body, if_absent=True):
            raise StoreError(
                f"another writer committed the run folder first (commit {commit.number}); nothing was committed",
                where=str(self.run),
            )

    def _publish(self, commit: Commit) -> None:
        """The commit's public files at their own keys: Delta log entries only if absent (an
        entry already there must be the same), the rest overwritten."""
        for rel in commit.publish:
            entry = commit.files[rel]
            path = self.root / rel
            data = path.read_bytes() if path.exists() else self.store.get(self.run.bucket, self.run.key(entry.key))
            if data is None:
                raise StoreError("a committed file's content is missing", where=str(self.run.child(entry.key)))
            if not _is_log_entry(rel):
                self.store.put(self.run.bucket, self.run.key(rel), data)
            elif not self.store.put(self.run.bucket, self.run.key(rel), data, if_absent=True):
                if self.store.get(self.run.bucket, self.run.key(rel)) != data:
                    raise StoreError(
                        "the Delta table on the store already has this version with other content: "
                        "another writer changed it",
                        where=str(self.run.child(rel)),
                    )

    def _prune(self, commit: Commit) -> None:
        """Commit records before the newest two, and blobs neither of those names."""
        numbers = self._commit_numbers()
        kept = [n for n in numbers if n > commit.number - _KEEP]
        referenced = {e.key for e in commit.files.values()}
        for number in kept:
            if number != commit.number:
                data = self.store.get(self.run.bucket, self._commit_key(number))
                if data:
                    referenced |= {e.key for e in Commit.parse(number, data).files.values()}
        for number in numbers:
            if number not in kept:
                self.store.delete(self.run.bucket, self._commit_key(number))
        for listed in self.store.list(self.run.bucket, self.run.key(BLOBS) + "/"):
            relative = listed.key[len(self.run.key()) :].lstrip("/")
            if relative not in referenced:
                self.store.delete(self.run.bucket, listed.key)

    # local ---------------------------------------------------------------------------------

    def _scan(self, known: dict) -> dict[str, Entry]:
        """Every file of the working copy; a file whose size and mtime the marker knows keeps
        its hash."""
        files: dict[str, Entry] = {}
        if not self.root.exists():
            return files
        for folder, _, names in os.walk(self.root):
            for name in names:
                path = Path(folder) / name
                rel = path.relative_to(self.root).as_posix()
                try:
                    stat = path.stat()
                    seen = known.get(rel)
                    sha = seen[0] if seen and (seen[1], seen[3]) == (stat.st_size, stat.st_mtime_ns) else _sha256(path)
                except FileNotFoundError:  # Spark's background threads replace and delete files mid-step
                    continue
                files[rel] = Entry(sha, stat.st_size, "", stat.st_mtime_ns)
        return files

    def _read_marker(self) -> dict:
        try:
            return json.loads(self.marker.read_text())
        except (OSError, ValueError):
            return {}

    def _write_marker(self, number: int, files: dict[str, Entry], *, clean: bool, published: bool = True) -> None:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "store": str(self.run),
            "commit": number,
            "clean": clean,
            "published": published,
            "files": {rel: [e.sha256, e.size, e.key, e.mtime_ns] for rel, e in files.items()},
        }
        partial = self.marker.with_name(self.marker.name + ".partial")
        partial.write_text(json.dumps(body))
        os.replace(partial, self.marker)

    def _commit_numbers(self) -> list[int]:
        listed = self.store.list(self.run.bucket, self.run.key(COMMITS) + "/")
        return sorted(int(k.key.rsplit("/", 1)[1].split(".")[0]) for k in listed if k.key.endswith(".json"))

    def _commit_key(self, number: int) -> str:
        return self.run.key(f"{COMMITS}/{number:012d}.json")


def _known_mtimes(commit: Commit, known: dict) -> None:
    for rel, entry in commit.files.items():
        seen = known.get(rel)
        if seen and seen[0] == entry.sha256:
            entry.mtime_ns = seen[3]


def _remove_empty_folders(root: Path) -> None:
    if not root.exists():
        return
    for folder, _, names in os.walk(root, topdown=False):
        if folder != str(root) and not names and not os.listdir(folder):
            os.rmdir(folder)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _delta_tables(files: dict[str, Entry]) -> set[str]:
    """The folders (relative) that are Delta tables: those holding a _delta_log."""
    return {rel.split("/_delta_log/")[0] for rel in files if "/_delta_log/" in rel}


def _is_table_data(rel: str, tables: set[str]) -> bool:
    """A public Delta table's data file: written once under a unique name, so it can go to its
    own key before the commit (a reader finds it only through a log entry)."""
    if rel.startswith(PRIVATE) or "/_delta_log/" in rel:
        return False
    return any(rel.startswith(table + "/") for table in tables)


def _is_segment(rel: str) -> bool:
    """A staged changelog segment: written once under its first row's number, and read by
    Spark's file source from its own key when the executors cannot see the working copy."""
    folder, _, name = rel.rpartition("/")
    return folder.endswith("/segments") and "/staged/" in folder and name.startswith("seg-")


def _is_log_entry(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return "/_delta_log/" in rel and name.endswith(".json") and name.split(".")[0].isdigit()


def _publish_order(rel: str) -> tuple:
    """Data and reports first, then each table's log entries by version, its checkpoint pointer
    last, so a reader that sees a pointer or a version finds what it names."""
    name = rel.rsplit("/", 1)[-1]
    if "/_delta_log/" not in rel:
        return (0, rel)
    if name == "_last_checkpoint":
        return (3, rel)
    if _is_log_entry(rel):
        return (2, rel)
    return (1, rel)
