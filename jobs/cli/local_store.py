"""A local S3 server to try lockstep against object storage (`lockstep demo --local-store`, the
object-storage tests): SeaweedFS (`weed server -s3`), built by `make setup` (scripts/seaweedfs.sh)
into .tools/bin, or the binary LOCKSTEP_WEED names. A master, a volume server, a filer and the S3
gateway run in one process on 127.0.0.1, with one identity whose keys a client must sign with
(anonymous requests are refused).

Its ports are picked free just before the start; a port taken in between makes the server fail
to answer, and the start is tried again with new ones. The process gets a parent-death signal, and
the context manager stops it whatever happens.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Self

import httpx

from jobs.errors import SetupError

WEED = Path(os.environ.get("LOCKSTEP_WEED") or Path(__file__).resolve().parents[2] / ".tools" / "bin" / "weed")
ACCESS_KEY, SECRET_KEY = "lockstep-local", "lockstep-local-secret"
PR_SET_PDEATHSIG = 1
_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port.grpc",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _dies_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class LocalServer:
    """A server this process starts on 127.0.0.1 and stops whatever happens: `with` calls start(),
    and stop() after it or after a start that failed half-way."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def ended(process: subprocess.Popen, wait: float) -> None:
    """Terminate a process and wait for it; killed if it has not ended after `wait` seconds."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class LocalS3Server(LocalServer):
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The variables a lockstep process reads the store's access from."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1",
        }

    def start(self, attempts: int = 3) -> None:
        if not WEED.exists():
            raise SetupError("SeaweedFS is not built: `make setup` builds it (scripts/seaweedfs.sh)", where=str(WEED))
        for attempt in range(attempts):
            self._launch()
            if self._wait_until_serving(timeout=60):
                return
            self.stop()
            if attempt == attempts - 1:
                raise SetupError("SeaweedFS did not serve S3 on 127.0.0.1", where=str(self.workdir / "weed.log"))

    def stop(self) -> None:
        if self.process is not None:
            ended(self.process, wait=3)  # its orderly shutdown takes 10 s; nothing needs it
        self.process = None

    def kill(self) -> None:
        """kill -9: the store gone mid-run, as a crashed or unreachable server."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def create_bucket(self, name: str) -> str:
        from jobs.store.access import StoreAccess
        from jobs.store.client import ObjectStore

        store = ObjectStore(StoreAccess(self.endpoint, "us-east-1", ACCESS_KEY, SECRET_KEY))
        try:
            for _ in range(40):  # the gateway answers a moment before its filer takes buckets
                response = store._send("PUT", name, "")
                if response.status_code in (200, 409):
                    return name
                time.sleep(0.25)
            raise SetupError(f"the local store made no bucket {name!r} ({response.status_code})", where=self.endpoint)
        finally:
            store.close()

    def _launch(self) -> None:
        data = self.workdir / "data"  # kept across a restart: the store's objects survive it
        data.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "s3.json"
        config.write_text(json.dumps({"identities": [_identity()]}))
        self.port = free_port()
        ports = [f"-{flag}={free_port()}" for flag in _PORTS]
        log = open(self.workdir / "weed.log", "ab")
        self.process = subprocess.Popen(
            [
                str(WEED),
                "server",
                f"-dir={data}",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                "-master.telemetry=false",
                # Small volumes, and room for many: the default sizes volumes for a disk, and a
                # new bucket (a collection) is refused once the volume count runs out.
                "-master.volumeSizeLimitMB=64",
                "-volume.max=64",
                "-s3",
                f"-s3.port={self.port}",
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                f"-s3.config={config}",
                *ports,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ},
            preexec_fn=_dies_with_parent,
        )

    def _wait_until_serving(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                httpx.get(self.endpoint, timeout=1)  # any answer, 403 included: the gateway is up
                return True
            except httpx.TransportError:
                time.sleep(0.25)
        return False


def _identity() -> dict:
    return {
        "name": "lockstep-local",
        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }


def main() -> None:
    """`python -m jobs.cli.local_store [DIR]`: a local S3 server with a bucket `lockstep`, its
    settings printed, until Ctrl-C."""
    import sys
    import tempfile

    workdir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="lockstep-local-store-"))
    with LocalS3Server(workdir) as server:
        server.create_bucket("lockstep")
        print(f"local S3 server on {server.endpoint}, objects in {workdir}; Ctrl-C stops it. Its settings:")
        print("".join(f"  export {name}={value}\n" for name, value in sorted(server.environment().items())))
        print("  lockstep run conf/queries/income_per_product.yaml --out s3a://lockstep/runs")
        until_interrupted()


def until_interrupted() -> None:
    """Wait for Ctrl-C (or a TERM): a server started by hand serves until then."""
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
