"""Run folders on an S3-compatible object store (`--out s3a://bucket/prefix`).

url.py          an s3a:// URL: its bucket and key prefix
access.py       where the endpoint and credentials come from (settings, environment, Airflow)
signing.py      AWS Signature Version 4 for the requests
client.py       ObjectStore: get, put (also put-if-absent), list, delete, over HTTP
lease.py        the single-writer lease: generation objects with an expiry and a holder
mirror.py       a run folder's files to and from the store; commit records are the commit
run_folder.py   the context every step holds: lease, restore, commit (docs/object-storage.md)
"""
