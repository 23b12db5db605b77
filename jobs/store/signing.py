"""AWS Signature Version 4 for S3 requests (path-style), the headers a request carries.

Written out rather than taken from boto3: botocore pins python-dateutil below the release the rest
of lockstep's stack needs, and the five calls lockstep makes need nothing else from it.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from urllib.parse import quote

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def signed_headers(
    method: str,
    host: str,
    path: str,
    query: dict[str, str],
    headers: dict[str, str],
    payload_sha256: str,
    *,
    access_key: str,
    secret_key: str,
    region: str,
    now: datetime | None = None,
) -> dict[str, str]:
    """The request's headers with x-amz-date, x-amz-content-sha256 and Authorization added."""
    moment = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    day = moment[:8]
    all_headers = {k.lower(): v.strip() for k, v in headers.items()}
    all_headers.update({"host": host, "x-amz-date": moment, "x-amz-content-sha256": payload_sha256})
    names = sorted(all_headers)
    canonical = "\n".join(
        [
            method,
            quote(path, safe="/-_.~"),
            canonical_query(query),
            "".join(f"{name}:{all_headers[name]}\n" for name in names),
            ";".join(names),
            payload_sha256,
        ]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", moment, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _signing_key(secret_key, day, region)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    all_headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return all_headers


def canonical_query(query: dict[str, str]) -> str:
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items()))


def _signing_key(secret_key: str, day: str, region: str) -> bytes:
    key = f"AWS4{secret_key}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key
