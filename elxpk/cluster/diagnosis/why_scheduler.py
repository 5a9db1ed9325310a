"""Why the scheduler leaves a pod unschedulable: its "0/N nodes are available: ..." message, split into its
per-node reasons (node selector, google.com/tpu, taints, host ports, the JobSet's exclusive placement), each
with its fix. Pure: the pod, the message and the TPU nodes' labels and taints (when listed) in, reasons out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from elxpk import catalog
from elxpk.cluster.diagnosis.why_capacity import label_gap
from elxpk.cluster.diagnosis.why_reason import Reason
from elxpk.cluster.objects.labels import ACCELERATOR, TOPOLOGY
from elxpk.cluster.objects.pods import Node, Pod

TPU = "google.com/tpu"
# "0/N nodes are available: K reason, K reason." and then other sentences (claims, preemption's own verdicts)
# Counts are ASCII digits, at most 19 of them ([0-9]{1,19}, not \d: that takes other scripts' digits, and
# int() refuses a 4,301-digit one with a ValueError), so every int() below reads what it matched.
_NODES = re.compile(r"^0/([0-9]{1,19}) nodes are available: (.*?)(?:\.(?: |$)|$)", re.S)
_PART = re.compile(r"^([0-9]{1,19}) (.*)$")


@dataclass(frozen=True)
class Own:
    """The workload's own hold on the nodes: which nodes its live pods are bound to, and how many live pods it
    asks for (one TPU host each). A node whose ports or chips the scheduler finds taken is another workload's
    only when none of these pods is bound there."""

    nodes: frozenset[str] = frozenset()
    pods: int = 0


def unschedulable(pod: dict | Pod, message: str, listed: Sequence[dict | Node] | None,
                  own: Own = Own()) -> list[Reason]:
    """The scheduler's message, per node reason: "0/32 nodes are available: 2 node(s) didn't have free ports
    ..., 30 node(s) didn't match Pod's node affinity/selector. preemption: ..."."""
    pod = Pod.of(pod)
    nodes = None if listed is None else tuple(map(Node.of, listed))
    selector = pod.node_selector
    accelerator, topology = selector.get(ACCELERATOR), selector.get(TOPOLOGY)
    shape = f"{ACCELERATOR.split('/')[1]} {accelerator}, {TOPOLOGY.split('/')[1]} {topology}" \
        if accelerator else "the pod's node selector"
    match = _NODES.match(message.strip())
    if not match:
        return [Reason("unschedulable", "unschedulable", "", f"scheduler: {message}")]
    total = int(match.group(1))
    parts = []
    for piece in re.split(r", (?=[0-9]+ )", match.group(2)):
        found = _PART.match(piece.strip())
        if found:
            parts.append((int(found.group(1)), found.group(2)))
    # The scheduler's taint filter runs before its node selector, so nodes of another shape (a GPU pool's
    # nvidia.com/gpu taint) are counted as "untolerated taint(s)": when no node of the pod's own shape has
    # such a taint (the listed nodes say so), those nodes are mismatched ones, not a taint to remove.
    foreign_taints = nodes is not None and bool(selector) and not _untolerated(pod, selector, nodes)
    if foreign_taints:
        parts = [(n, "didn't match Pod's node affinity/selector" if "untolerated taint" in text else text)
                 for n, text in parts]
    mismatched = sum(n for n, text in parts if "didn't match Pod's node affinity/selector" in text)
    if mismatched >= total:
        pools = ""
        if nodes is not None:
            same = sorted({n.labels.get(TOPOLOGY, "?") for n in nodes if n.labels.get(ACCELERATOR) == accelerator})
            pools = f"; node pools with {accelerator}: {', '.join(same) or 'none'}"
            gap = label_gap(selector, nodes, (ACCELERATOR, TOPOLOGY))
            if gap:
                return [Reason("no-node-pool", f"the nodes with {shape} lack what the pod also selects: {gap[0]}",
                               gap[1], f"scheduler: {message}")]
        return [Reason("no-node-pool", f"no node pool has {shape}{pools}", _node_pool_fix(accelerator, topology),
                       f"scheduler: {message}")]
    out: list[Reason] = []
    for n, text in parts:
        if "didn't match Pod's node affinity/selector" in text:
            continue
        held = _held(n, text, selector, nodes, own)
        if held is not None and held.others == 0:
            out.append(_too_few_nodes(shape, held, own))
        elif f"Insufficient {TPU}" in text:
            out.append(Reason("insufficient-tpu", f"{n} node(s) with {shape} have too few free {TPU} for the "
                              f"pod ({_tpu_request(pod)} asked; scheduler: Insufficient {TPU})",
                              "other pods hold the chips, or the device plugin reports fewer healthy chips: "
                              "see the allocated google.com/tpu of the nodes labelled "
                              + _label_selector(selector) + "; free them "
                              "(`elxpk workload list`), or use fewer/smaller slices (--num-slices, --tpu-type)"))
        elif "untolerated taint" in text:
            # The scheduler names no taint since Kubernetes 1.30 ("had untolerated taint(s)"): the nodes do.
            taints = _untolerated(pod, selector, nodes)
            named = ", ".join(f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in taints)
            out.append(Reason("taint", f"{n} node(s) with {shape} have a taint the pod does not tolerate"
                              + (f": {named}" if named else ""),
                              "once the nodes are fit, remove the taint "
                              + (", ".join(str(t.get("key")) for t in taints) or "KEY")
                              + f" from the nodes labelled {_label_selector(selector)}"))
        elif "free ports" in text:
            by = "another workload's pods hold" if held is None or not held.ours else (
                f"{held.others} held by another workload's pods, {held.ours} by this workload's own; they hold")
            out.append(Reason("host-ports", f"{n} node(s) with {shape} are taken: {by} "
                              "their host ports (one TPU workload per host)",
                              "`elxpk workload list` shows what runs there; wait for it, delete it, or give this "
                              "one a higher --priority (Kueue preempts)"))
        elif "affinity" in text or "topology spread" in text:
            out.append(Reason("exclusive-placement", f"{n} node(s) with {shape} are in node pools another "
                              f"slice already holds (JobSet exclusive-topology: one slice per node pool; {text})",
                              "fewer slices (--num-slices) or more node pools of this shape"))
        else:
            out.append(Reason("unschedulable", f"{n} node(s): {text}"))
    return [Reason(r.cause, r.text, r.fix, f"scheduler: {message}") for r in out]


class _Held(NamedTuple):
    busy: int  # the nodes the scheduler found taken (their ports or chips)
    ours: int  # of those, the ones this workload's own live pods are bound to
    others: int  # the rest: another workload's
    shaped: int | None  # the nodes of the pod's shape, when the nodes were listed


def _held(n: int, text: str, selector: Mapping[str, str], nodes: tuple[Node, ...] | None, own: Own) -> _Held | None:
    """Who holds the `n` nodes a part of the message finds taken (host ports, chips); None for other parts."""
    if "free ports" not in text and f"Insufficient {TPU}" not in text:
        return None
    named = nodes is not None and all(node.name for node in nodes)
    if named and nodes is not None:
        shaped = {node.name for node in nodes
                  if all(node.labels.get(k) == selector.get(k) for k in (ACCELERATOR, TOPOLOGY))}
        ours = min(n, len(own.nodes & shaped))
        return _Held(n, ours, n - ours, len(shaped))
    ours = min(n, len(own.nodes))  # the pod's own selector put its bound pods on nodes of this shape
    return _Held(n, ours, n - ours, None)


def _too_few_nodes(shape: str, held: _Held, own: Own) -> Reason:
    """Every taken node of the shape is this workload's own: the slices ask for more hosts than there are."""
    there = held.shaped if held.shaped is not None else held.busy
    return Reason("too-few-nodes", f"not enough nodes of this type for the slices: {there} node(s) with {shape}, "
                  f"and the workload asks for {own.pods} pods, one TPU host each; its own pods hold the "
                  f"{held.ours} taken, no other workload's do",
                  f"fewer slices (--num-slices, so that slices x hosts per slice is at most {there}), or more "
                  "nodes of this shape (a larger or another node pool)")


def _untolerated(pod: Pod, selector: Mapping[str, str], nodes: tuple[Node, ...] | None) -> list[Mapping]:
    tolerations = pod.tolerations
    found: dict[tuple, Mapping] = {}
    for node in nodes or ():
        if any(node.labels.get(k) != v for k, v in selector.items()):
            continue
        for taint in node.taints:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
                found[(taint.get("key"), taint.get("value"), taint.get("effect"))] = taint
    return list(found.values())


def _tolerates(tolerations: Sequence[Mapping], taint: Mapping) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _tpu_request(pod: Pod) -> str:
    for limits in pod.limits:
        value = limits.get(TPU)
        if value:
            return f"{value} chips"
    return "chips"


def _label_selector(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in selector.items() if k in (ACCELERATOR, TOPOLOGY)) or "KEY=VALUE"


def _node_pool_fix(accelerator: str | None, topology: str | None) -> str:
    for spelling in catalog.all_names():
        tpu = catalog.lookup(spelling)
        if (tpu.gke_accelerator, tpu.topology) == (accelerator, topology):
            return (f"`--tpu-type {tpu.name}` needs a node pool of {tpu.machine_type} with --tpu-topology "
                    f"{topology} (`xpk cluster create --tpu-type {tpu.name}` makes one), or pick a --tpu-type "
                    "that a node pool has")
    return "add a node pool matching the pod's node selector, or pick a --tpu-type that a node pool has"
