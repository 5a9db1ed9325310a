"""TrainerConfig: the one typed, frozen source of truth for every trainer setting.

Each field is a flag (`--field-name`) and an environment variable (`ELXPK_FIELD_NAME`); flags override
env vars, env vars override defaults (the launcher passes settings as env vars, see docs/interfaces.md).
The elastic and checkpoint settings keep MaxText's names. Validation runs before any I/O and reports
every problem at once as one `UsageError`, one line per problem, each naming its flag and the fix.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elxpk.errors import UsageError

BACKENDS = ("simulated", "pathways", "multi-controller")


def _opt(default, help: str, **extra):
    return field(default=default, metadata={"help": help, **extra})


@dataclass(frozen=True)
class TrainerConfig:
    # Run layout.
    run_dir: str = _opt("elxpk-run", "directory for metrics.jsonl, events.jsonl, run.json")
    checkpoint_dir: str | None = _opt(None, "checkpoint directory (default RUN_DIR/checkpoints)")
    steps: int = _opt(200, "number of train steps")
    checkpoint_period: int = _opt(100, "save a checkpoint every this many steps")
    max_to_keep: int = _opt(3, "checkpoints kept on disk (>= 2, so a corrupt newest one has a fallback)")
    seed: int = _opt(0, "seed of the parameters, the data and the per-step RNG")
    # Topology.
    num_slices: int = _opt(2, "number of slices")
    devices_per_slice: int = _opt(2, "devices per slice (CPU: virtual XLA host devices)")
    slice_backend: str = _opt("simulated", "simulated | pathways | multi-controller")
    # Elastic retry loop (MaxText names).
    elastic_enabled: bool = _opt(False, "retry in the same process after a slice loss")
    elastic_min_slice_count: int = _opt(-1, "-1: wait for all slices (pause-and-resume); k: resize onto >= k")
    elastic_timeout_seconds: float = _opt(300.0, "how long one attempt waits for enough healthy slices")
    elastic_max_retries: int = _opt(10, "total attempts, counted like pathwaysutils (1 = no retry)")
    elastic_poll_seconds: float = _opt(1.0, "how often the wait for slices probes them")
    # Model, data and optimiser (all part of the checkpoint fingerprint).
    global_batch: int = _opt(16, "examples per step, constant when the slice count changes")
    seq_len: int = _opt(64, "tokens per example")
    vocab_size: int = _opt(512, "vocabulary size")
    d_model: int = _opt(256, "model width")
    n_layers: int = _opt(4, "transformer blocks")
    n_heads: int = _opt(4, "attention heads")
    d_ff: int = _opt(1024, "MLP hidden width")
    dropout: float = _opt(0.1, "dropout rate (the per-step RNG is fold_in(seed, step))")
    learning_rate: float = _opt(3e-3, "peak learning rate")
    warmup_steps: int = _opt(20, "linear warm-up steps")
    decay_steps: int = _opt(1000, "cosine decay horizon in steps (independent of --steps)")
    weight_decay: float = _opt(0.01, "AdamW weight decay")
    # Simulated faults (simulated backend; multi-controller kills its own process).
    fault: tuple[str, ...] = _opt((), "inject a fault: K@STEP, K@data:STEP, K@save:STEP, K@restore [+REVIVE_STEP]")
    revive_after: float | None = _opt(None, "seconds until a killed slice comes back (default: never)")
    # Multi-controller backend.
    process_id: int = _opt(0, "this process's index (multi-controller)")
    num_processes: int = _opt(1, "number of processes, one per slice (multi-controller)")
    coordinator: str | None = _opt(None, "jax.distributed coordinator HOST:PORT (multi-controller; omit on a "
                                         "TPU cluster, where jax detects it)")
    heartbeat_timeout_seconds: int = _opt(10, "jax.distributed heartbeat timeout (multi-controller)")

    def __post_init__(self) -> None:
        if self.checkpoint_dir is None:
            object.__setattr__(self, "checkpoint_dir", str(Path(self.run_dir) / "checkpoints"))
        object.__setattr__(self, "fault", tuple(self.fault))
        problems = self.problems()
        if problems:
            raise UsageError(*problems)

    @classmethod
    def from_args(cls, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> TrainerConfig:
        """Flags over ELXPK_* env vars over defaults; every conversion error is reported at once."""
        environ = environ or {}
        parser = _parser()
        namespace = parser.parse_args(list(argv or []))
        values, errors = {}, []
        for f in dataclasses.fields(cls):
            raw = getattr(namespace, f.name)
            source = flag_name(f.name)
            if raw is None or raw == []:
                env_key = env_name(f.name)
                if env_key not in environ:
                    continue
                raw, source = environ[env_key], env_key
                if f.name == "fault":
                    raw = [s for s in raw.split(",") if s.strip()]
            try:
                values[f.name] = _convert(f, raw)
            except ValueError as exc:
                errors.append(f"{source} {raw!r}: {exc}")
        if errors:
            raise UsageError(*errors)
        return cls(**values)

    def problems(self) -> list[str]:
        """Every validation message (empty when the config is usable)."""
        p = []
        positive = ("steps", "checkpoint_period", "num_slices", "devices_per_slice", "global_batch",
                    "seq_len", "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "decay_steps",
                    "elastic_max_retries", "num_processes", "heartbeat_timeout_seconds")
        for name in positive:
            if getattr(self, name) < 1:
                p.append(f"{flag_name(name)} {getattr(self, name)}: must be at least 1")
        for name in ("elastic_timeout_seconds", "elastic_poll_seconds"):
            if not getattr(self, name) > 0:
                p.append(f"{flag_name(name)} {getattr(self, name)}: must be a positive number of seconds")
        if self.max_to_keep < 2:
            p.append(f"--max-to-keep {self.max_to_keep}: keep at least 2 so a corrupt newest checkpoint "
                     "has a valid predecessor")
        if self.warmup_steps < 0:
            p.append(f"--warmup-steps {self.warmup_steps}: must be 0 or more")
        if not 0.0 <= self.dropout < 1.0:
            p.append(f"--dropout {self.dropout}: must be in [0, 1)")
        if self.slice_backend not in BACKENDS:
            p.append(f"--slice-backend {self.slice_backend!r}: use one of {', '.join(BACKENDS)}")
        if self.d_model % max(self.n_heads, 1):
            p.append(f"--n-heads {self.n_heads}: must divide --d-model {self.d_model}")
        k = self.elastic_min_slice_count
        if k == 0 or k < -1 or k > self.num_slices:
            p.append(f"--elastic-min-slice-count {k}: use -1 (all slices) or 1..{self.num_slices} (--num-slices)")
        if not self.topology_from_hardware:
            p.extend(self.batch_problems(self.devices_per_slice))
        p.extend(self._controller_problems())
        try:
            from trainer.faults import FaultSchedule

            p.extend(FaultSchedule.parse(self.fault, self.revive_after).problems(self.num_slices))
        except ValueError as exc:
            p.extend(str(exc).splitlines())
        return p

    def batch_problems(self, devices_per_slice: int, where: str = "") -> list[str]:
        """The global batch must split evenly over every device of every slice count a run may reach."""
        for n in self.slice_counts():
            if n >= 1 and self.global_batch % (n * max(devices_per_slice, 1)):
                return [f"--global-batch {self.global_batch}: must divide evenly over {n} slice(s) x "
                        f"{devices_per_slice} devices{where}; use a multiple of "
                        f"{self._batch_multiple(devices_per_slice)}"]
        return []

    def _controller_problems(self) -> list[str]:
        p = []
        if self.slice_backend != "multi-controller":
            if self.coordinator is not None:
                p.append(f"--coordinator {self.coordinator}: only with --slice-backend multi-controller")
            return p
        if self.coordinator is None:
            # On a TPU cluster jax detects the process and the process count; a half-given layout is a mistake.
            for name, default in (("process_id", 0), ("num_processes", 1)):
                if getattr(self, name) != default:
                    p.append(f"{flag_name(name)} {getattr(self, name)}: give it only together with --coordinator "
                             "(without one, jax detects the processes of the TPU cluster)")
            return p
        host, _, port = self.coordinator.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            p.append(f"--coordinator {self.coordinator!r}: use HOST:PORT, e.g. 127.0.0.1:8476")
        if self.num_processes != self.num_slices:
            p.append(f"--num-processes {self.num_processes}: must equal --num-slices {self.num_slices} "
                     "(one slice per process with --coordinator)")
        if not 0 <= self.process_id < self.num_processes:
            p.append(f"--process-id {self.process_id}: must be in 0..{self.num_processes - 1}")
        return p

    @property
    def topology_from_hardware(self) -> bool:
        """Pathways and multi-controller on a TPU cluster take the devices per slice from the hardware."""
        return self.slice_backend == "pathways" or (self.slice_backend == "multi-controller"
                                                    and self.coordinator is None)

    def on_hardware(self, num_slices: int, devices_per_slice: int, where: str) -> TrainerConfig:
        """This config on the topology the backend found (`where`, e.g. 'the TPU cluster').

        Raises UsageError when the hardware contradicts it: another slice count, or a global batch that
        does not divide over the real devices.
        """
        problems = []
        if num_slices != self.num_slices:
            problems.append(f"--num-slices {self.num_slices}: {where} has {num_slices} slice(s); set --num-slices "
                            f"(ELXPK_NUM_SLICES) to {num_slices}")
        problems.extend(self.batch_problems(devices_per_slice, f" ({where} has {devices_per_slice} per slice)"))
        if problems:
            raise UsageError(*problems)
        if devices_per_slice == self.devices_per_slice:
            return self
        return dataclasses.replace(self, devices_per_slice=devices_per_slice)

    def slice_counts(self) -> range:
        """Every slice count a run may train on: the global batch must divide over each of them."""
        low = self.num_slices if self.elastic_min_slice_count == -1 else self.elastic_min_slice_count
        return range(low, self.num_slices + 1)

    def _batch_multiple(self, devices_per_slice: int) -> int:
        from math import lcm

        return lcm(*(n * devices_per_slice for n in self.slice_counts()))

    @property
    def resize_enabled(self) -> bool:
        return self.elastic_min_slice_count != -1 and self.elastic_min_slice_count < self.num_slices

    @property
    def min_slices(self) -> int:
        return self.num_slices if self.elastic_min_slice_count == -1 else self.elastic_min_slice_count

    def fingerprint(self) -> str:
        """Hash of what makes a checkpoint meaningful: model, batch, seed, data and optimiser."""
        return hashlib.sha256(json.dumps(self.fingerprint_fields(), sort_keys=True).encode()).hexdigest()[:16]

    def fingerprint_fields(self) -> dict:
        names = ("global_batch", "seq_len", "vocab_size", "d_model", "n_layers", "n_heads", "d_ff",
                 "dropout", "learning_rate", "warmup_steps", "decay_steps", "weight_decay", "seed")
        return {"dataset": "synthetic-v1", **{n: getattr(self, n) for n in names}}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_name(name: str) -> str:
    return "ELXPK_" + name.upper()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit; report like every other error
        raise UsageError(f"{message} (see python -m trainer --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m trainer", description="elxpk's deterministic elastic JAX trainer.")
    for f in dataclasses.fields(TrainerConfig):
        help_text = f"{f.metadata['help']} [env {env_name(f.name)}; default {f.default!r}]"
        if f.type == "bool":
            parser.add_argument(flag_name(f.name), dest=f.name, action=argparse.BooleanOptionalAction,
                                default=None, help=help_text)
        elif f.name == "fault":
            parser.add_argument(flag_name(f.name), dest=f.name, action="append", default=None,
                                help=help_text + " (repeatable; env: comma-separated)")
        else:
            parser.add_argument(flag_name(f.name), dest=f.name, default=None, help=help_text)
    return parser


def _convert(f: dataclasses.Field, raw):
    kind = f.type
    if f.name == "fault":
        return tuple(raw)
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip()
    if kind == "bool":
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError("use true or false")
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ValueError("must be a whole number") from None
    if kind in ("float", "float | None"):
        if kind == "float | None" and text.lower() in ("", "none", "never"):
            return None
        try:
            return float(text)
        except ValueError:
            raise ValueError("must be a number") from None
    return text
