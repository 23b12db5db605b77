"""The demo's dimension service: a folder of <table>.json files served as GET /<table>/<key>.

The demo's lookup-join spec (conf/queries/enriched_orders.yaml) asks it for customers. A plain
threaded http.server is enough for a few dozen keys; the tests have their own service with
latency and failures to inject (tests/support/dimension_server.py).
"""

from __future__ import annotations

import argparse
import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


def tables_in(folder: Path) -> dict[str, dict[str, dict]]:
    """Each <table>.json is an object {key: row}."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(Path(folder).glob("*.json"))}


class DemoDimensionService:
    def __init__(self, tables: dict[str, dict[str, dict]], port: int):
        handler = type("Handler", (_Handler,), {"tables": tables})
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)  # OSError if the port is taken
        self.tables = tuple(tables)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> DemoDimensionService:
        threading.Thread(target=self.server.serve_forever, daemon=True, name="demo-dimensions").start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the lookup client reuses its connections
    tables: dict[str, dict[str, dict]] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        parts = urlsplit(self.path).path.split("/")
        row = self.tables.get(unquote(parts[1]), {}).get(unquote(parts[2])) if len(parts) == 3 else None
        status, body = (HTTPStatus.OK, json.dumps(row)) if row is not None else (HTTPStatus.NOT_FOUND, "{}")
        payload = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's signature)
        pass  # the demo's progress output is lockstep's, not one line per request


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Serve a folder of <table>.json dimension tables as GET /<table>/<key> on 127.0.0.1 until Ctrl-C."
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    with DemoDimensionService(tables_in(args.folder), args.port) as service:
        print(f"dimension service on {service.url} serving {', '.join(service.tables)}; Ctrl-C stops it")
        threading.Event().wait()


if __name__ == "__main__":
    main()
