"""Submit a rendered manifest: preflight, then create each object exactly once.

Exactly once: every object is stamped with a random submission id (annotation elxpk.dev/submission-id).
When a create goes unanswered (timeout, dropped connection, 5xx), the object is read back before anything
is sent again: if it exists with our id, the first create landed and is the result; if it does not exist,
the create is repeated; if it exists with another id, that is someone else's workload (ConflictError). The
tries and the pauses between them are elxpk's one retry policy (elxpk/retry_policy.py), as for every read.
"""

from __future__ import annotations

import copy
import re
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from elxpk.cluster.access.connect import connect
from elxpk.cluster.access.target import DEFAULT_NAMESPACE, ClusterTarget
from elxpk.cluster.api.api_errors import ApiFailure
from elxpk.cluster.api.kube import Kube
from elxpk.cluster.objects.labels import SUBMISSION_ANNOTATION
from elxpk.cluster.objects.meta import Meta
from elxpk.cluster.verbs.preflight import preflight
from elxpk.errors import ConflictError, NotFoundError, Timeout
from elxpk.shown import shown


def _warn(message: str) -> None:
    print(f"warning: {shown(message)}", file=sys.stderr)  # an API server's Warning header: its text


def submit(manifest: Any, target: ClusterTarget, *, server_dry_run: bool = False, replace: bool = False,
           kube: Kube | None = None, submission_id: str | None = None,
           sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
           warn: Callable[[str], None] = _warn, attempts: int | None = None) -> list[dict]:
    """Preflight, then create every object of `manifest` (in order); returns what the server answered.

    `server_dry_run` sends dryRun=All: the API server validates and admits but persists nothing.
    `replace` deletes an existing workload of the same name first (foreground) and waits until it is gone.
    `attempts`: the creates each object may take (default: the Kube's, as for its reads).
    """
    if kube is None:
        kube = connect(target)
    objects = [copy.deepcopy(o) for o in manifest.objects]
    namespace = target.namespace
    for warning in preflight(kube, objects, namespace):
        warn(warning)
    sid = submission_id or uuid.uuid4().hex
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("annotations", {})[SUBMISSION_ANNOTATION] = sid
    created = []
    for obj in objects:
        ns = Meta.of(obj).namespace or namespace
        created.append(_create_once(kube, obj, ns, sid, dry_run=server_dry_run, replace=replace, sleep=sleep,
                                    clock=clock, attempts=attempts))
    return created


def _ours(existing: dict, sid: str) -> bool:
    return Meta.of(existing).annotations.get(SUBMISSION_ANNOTATION) == sid


def _create_once(kube: Kube, obj: dict, namespace: str, sid: str, *, dry_run: bool, replace: bool,
                 sleep: Callable[[float], None], clock: Callable[[], float], attempts: int | None) -> dict:
    name, kind = str(Meta.of(obj).name), obj.get("kind", "object")
    unanswered = False
    replaced = False
    policy = kube.retry_policy()
    tries = policy._replace(tries=attempts or policy.tries).tries_of(sleep)
    for _ in tries:
        try:
            return kube.create(obj, namespace, dry_run=dry_run)
        except ConflictError:
            if unanswered and _ours(kube.get_object(obj, namespace), sid):
                return kube.get_object(obj, namespace)
            if replace and dry_run:
                return obj  # the server would replace it; a dry run leaves the existing one alone
            if replace and not replaced:
                _delete_and_wait(kube, obj, namespace, sleep=sleep, clock=clock)
                replaced = True
                continue
            raise ConflictError(
                f'{kind} "{name}" already exists in namespace "{namespace}": delete it first '
                f"(elxpk workload delete {name}) or pass --replace") from None
        except ApiFailure as exc:
            if not exc.retryable or not tries.again(exc.retry_after):
                raise
            if dry_run:
                continue  # nothing was persisted: simply ask again
            unanswered = True
            try:
                existing = kube.get_object(obj, namespace)
            except NotFoundError:
                continue  # the first create did not land: sending it again cannot duplicate
            if _ours(existing, sid):
                return existing
            raise ConflictError(
                f'{kind} "{name}" appeared in namespace "{namespace}" from another submission while this '
                "one went unanswered: check it with elxpk workload status") from None
    raise AssertionError("unreachable")


def _delete_and_wait(kube: Kube, obj: dict, namespace: str, *, sleep: Callable[[float], None],
                     clock: Callable[[], float], timeout_s: float = 300.0) -> None:
    try:  # the one object the 409 was about: its uid is the delete's precondition
        existing = kube.get_object(obj, namespace)
    except NotFoundError:
        return  # gone meanwhile: create again
    kube.delete_object(obj, namespace, uid=Meta.of(existing).uid or "")
    deadline = clock() + timeout_s
    while clock() < deadline:
        try:
            kube.get_object(obj, namespace)
        except NotFoundError:
            return
        sleep(2.0)
    raise Timeout(f'--replace: {obj.get("kind")} "{Meta.of(obj).name}" is still being deleted after '
                  f"{timeout_s:.0f}s; retry when it is gone")


def follow_up_commands(name: str, target: ClusterTarget) -> list[str]:
    """What to run next, with the same cluster selection (printed by `workload create`)."""
    if target.kubeconfig or target.context:
        flags = " ".join(f for f in (f"--kubeconfig {target.kubeconfig}" if target.kubeconfig else "",
                                     f"--context {target.context}" if target.context else "") if f)
    else:
        where = "--zone" if re.search(r"-[a-z]$", target.location or "") else "--region"
        flags = f"--project {target.project} {where} {target.location} --cluster {target.cluster}"
        flags = flags if target.project else ""
    if target.namespace != DEFAULT_NAMESPACE:
        flags += f" -n {target.namespace}"
    flags = (" " + flags.strip()) if flags.strip() else ""
    return [
        f"elxpk workload status {name}{flags}",
        f"elxpk workload wait {name} --for completed{flags}",
        f"elxpk workload logs {name} -f{flags}",
        f"elxpk workload delete {name}{flags}",
    ]
