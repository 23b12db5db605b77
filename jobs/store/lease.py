"""One writer per run folder on an object store, across hosts: a lease.

A lease is an object `_lease/<generation>.json` under the run folder's URL, created only if absent
(If-None-Match: *), so of two writers taking the same generation one gets it and the other is
refused. It names its holder (host, pid, command) and an expiry, renewed every third of the lease
by a thread while the step runs. The newest generation is the lease in force: a writer may take
the next one when that is released or expired, so a killed holder's lease lapses by itself. Expiry
is judged by the taker's clock against the holder's: hosts must agree to well within the lease.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import uuid

from jobs.errors import RunLocked
from jobs.store.client import ObjectStore
from jobs.store.url import StoreUrl

FOLDER = "_lease"


class Lease:
    def __init__(self, store: ObjectStore, run: StoreUrl, seconds: int):
        self.store, self.run, self.seconds = store, run, seconds
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.generation: int | None = None
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self) -> None:
        newest, body = self._newest()
        if body and not body.get("released") and body.get("expires", 0) > time.time():
            raise RunLocked(_in_use(body), where=str(self.run))
        generation = newest + 1
        if not self.store.put(self.run.bucket, self._key(generation), self._body(), if_absent=True):
            _, body = self._newest()
            raise RunLocked(_in_use(body or {}), where=str(self.run))
        self.generation = generation
        self._renewer = threading.Thread(target=self._renew, name="lockstep-lease", daemon=True)
        self._renewer.start()

    def holds(self) -> bool:
        """Whether this lease is still the one in force (checked before a commit)."""
        newest, body = self._newest()
        return newest == self.generation and body is not None and body.get("holder") == self.holder

    def release(self) -> None:
        if self.generation is None:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.holds():
            self.store.put(self.run.bucket, self._key(self.generation), self._body(released=True))
            self._prune()
        self.generation = None

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                if self.generation is not None:
                    self.store.put(self.run.bucket, self._key(self.generation), self._body())
            except Exception:  # the commit checks the lease again; a missed renewal is not fatal by itself
                pass

    def _newest(self) -> tuple[int, dict | None]:
        keys = self.store.list(self.run.bucket, self.run.key(FOLDER) + "/")
        generations = sorted(int(k.key.rsplit("/", 1)[1].split(".")[0]) for k in keys if k.key.endswith(".json"))
        if not generations:
            return 0, None
        data = self.store.get(self.run.bucket, self._key(generations[-1]))
        return generations[-1], json.loads(data) if data else None

    def _prune(self) -> None:
        """Leases before the newest two are history nobody reads."""
        for listed in self.store.list(self.run.bucket, self.run.key(FOLDER) + "/"):
            generation = int(listed.key.rsplit("/", 1)[1].split(".")[0])
            if self.generation is not None and generation < self.generation - 1:
                self.store.delete(self.run.bucket, listed.key)

    def _key(self, generation: int) -> str:
        return self.run.key(f"{FOLDER}/{generation:012d}.json")

    def _body(self, *, released: bool = False) -> bytes:
        return json.dumps(
            {
                "holder": self.holder,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "command": " ".join(sys.argv)[:200],
                "started": self.started,
                "expires": time.time() + self.seconds,
                "released": released,
            }
        ).encode()


def _in_use(body: dict) -> str:
    left = max(0, int(body.get("expires", 0) - time.time()))
    return (
        f"the run folder is in use by pid {body.get('pid')} on {body.get('host')} since "
        f"{body.get('started')} ({body.get('command')}); its lease expires in {left} s unless renewed"
    )
