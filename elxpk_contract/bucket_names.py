"""Cloud Storage's bucket-name rules, checked on every `gs://` setting before anything runs.

A name GCS cannot have (`gs://ab/run`) was found only at the first save, after the first steps had trained,
as a traceback from each writer (92 of them) and exit 70. The rules, from
https://cloud.google.com/storage/docs/buckets#naming:
- 3 to 63 characters; up to 222 when it holds dots, each dot-separated part at most 63;
- lowercase letters, digits, dashes, underscores and dots only;
- it starts and ends with a letter or a digit;
- not an IP address in dotted-decimal notation, and no `goog` prefix (nor `google` inside).
Standard library only: the launcher's `workload create` and the trainer both call `gcs_url_problem`.
"""

from __future__ import annotations

import re

_ALLOWED = re.compile(r"[a-z0-9._-]+", re.ASCII)
_IP = re.compile(r"\d{1,3}(\.\d{1,3}){3}", re.ASCII)
_ENDS = re.compile(r"[a-z0-9]", re.ASCII)


def bucket_problem(bucket: str) -> str | None:
    """Why `bucket` is no valid Cloud Storage bucket name, or None."""
    limit = 222 if "." in bucket else 63
    if not 3 <= len(bucket) <= limit:
        return f"the bucket name {bucket!r:.80} has {len(bucket)} characters; GCS needs 3 to {limit}"
    if not _ALLOWED.fullmatch(bucket):
        return (f"the bucket name {bucket!r:.80} may hold only lowercase letters, digits, '-', '_' and '.'")
    if not (_ENDS.fullmatch(bucket[0]) and _ENDS.fullmatch(bucket[-1])):
        return f"the bucket name {bucket!r:.80} must start and end with a letter or a digit"
    if any(len(part) > 63 or not part for part in bucket.split(".")):
        return f"the bucket name {bucket!r:.80} has an empty or over-63-character part between dots"
    if _IP.fullmatch(bucket):
        return f"the bucket name {bucket!r:.80} is an IP address, which GCS refuses"
    if bucket.startswith("goog") or "google" in bucket:
        return f"the bucket name {bucket!r:.80} starts with 'goog' or holds 'google', which GCS refuses"
    return None


def gcs_url_problem(source: str, value: str) -> str | None:
    """One line naming `source` when `value` is a `gs://` URL whose bucket GCS cannot have; else None."""
    if not value.startswith("gs://"):
        return None
    bucket = value[len("gs://"):].split("/", 1)[0]
    problem = bucket_problem(bucket)
    if problem is None:
        return None
    return f"{source} {value!r:.200}: {problem}; give gs://BUCKET/PATH with a valid bucket, e.g. gs://my-bucket/run"
