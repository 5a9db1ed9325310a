"""The trainer settings table: every setting declared once, with its type, default, bounds, help and
MaxText name. Everything else reads it: the trainer's flags and ELXPK_* env, `workload create`'s trainer
flags and their checks, the env the launcher renders, `elxpk local run`, and the planner's defaults.

Each field is a flag (`--field-name`) and an environment variable (`ELXPK_FIELD_NAME`); flags override
env vars, env vars override defaults. The elastic and checkpoint settings keep MaxText's names.
Validation runs before any I/O and reports every problem at once as one `UsageError`, one line per
problem, each naming its flag and the fix; the launcher, `local run` and the trainer share the messages.
The rows also reach elxpk_contract/settings_table.py as generated plain data (`python -m
elxpk_contract.settings_build`), which elxpk_contract/setting_rules.py reads with the rules: the launcher
imports those, not this dataclass. Standard library only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from math import lcm
from pathlib import Path
from typing import Any

from elxpk_contract.errors import UsageError
from elxpk_contract.presets import DEFAULT_MODEL, MODEL_PRESETS, SHAPE_SETTINGS, preset_value

# The table's rows as plain data and the rules that read them (the launcher imports only those; see
# elxpk_contract/setting_rules.py), re-exported: this module stays the one place to import the table from.
from elxpk_contract.setting_rules import (
    ALL_SLICES,
    FIELDS,
    LAUNCHER_DERIVED,
    LAUNCHER_FLAG,
    SECONDS,
    Setting,
    bounds_problem,
    bounds_text,
    check_setting,
    cross_problems,
    default,
    env_name,
    exposed,
    flag_name,
    plain_number_text,
    redundant_min_slice_count,
    said,
    setting,
    slices_waited_for,
)
from elxpk_contract.step_names import ascii_number

__all__ = ["ACTIONS", "ALL_SLICES", "BACKENDS", "COMPUTE_DTYPES", "ATTENTIONS", "LOGITS_DTYPES", "REMAT_POLICIES", "FIELDS",
           "LAUNCHER_DERIVED", "LAUNCHER_FLAG", "PROFILERS", "RECOVERIES", "SECONDS", "Setting", "TrainerConfig",
           "bounds_problem", "bounds_text", "check_setting",
           "cross_problems", "default", "env_name", "exposed", "flag_name",
           "plain_number_text", "redundant_min_slice_count", "said", "setting", "slices_waited_for"]

# jax.experimental.topologies' names of a TPU slice: v5e:4x4, v5p:2x2x2 (ASCII only: \d takes any digit).
_TPU_SLICE = re.compile(r"[a-z][a-z0-9]{1,9}:[0-9]{1,4}(x[0-9]{1,4}){1,2}", re.ASCII)
BACKENDS = ("simulated", "pathways", "multi-controller")
RECOVERIES = ("live", "checkpoint")  # live: from the surviving slices' state, where the backend can reach it
COMPUTE_DTYPES = ("auto", "float32", "bfloat16")  # auto: bfloat16 on GPU and TPU, float32 on CPU
ATTENTIONS = ("auto", "xla", "cudnn", "splash")  # trainer/core/attention.py
LOGITS_DTYPES = ("auto", "float32")  # auto: the compute dtype (trainer/core/model.py)
PROFILERS = ("off", "xplane")  # trainer/profile_capture.py; MaxText's "" is off here
REMAT_POLICIES = ("auto", "none", "minimal_with_context", "minimal", "save_dot_except_mlp", "save_qkv_proj",
                  "full")  # trainer/core/remat.py


# Flags of `python -m trainer` that do something instead of setting something: not rows of the table,
# never in the config, its JSON or the env. Name -> help.
ACTIONS: dict[str, str] = {
    "print_config": "print the resolved configuration (flags over ELXPK_* env over defaults) as JSON with "
                    "sorted keys and exit 0, without importing jax; bad settings exit 2 as a run would",
    "compile_only": "compile the real train step for --num-slices TPU slices of --compile-topology, which this "
                    "machine need not have (libtpu must be installed), print its per-device memory as JSON and "
                    "exit 0; nothing is written (trainer/compile_only.py)",
}


def _opt(default: Any, help: str, *, low: float | None = None, high: float | None = None,
         low_open: bool = False, high_open: bool = False, repeatable: bool = False,
         choices: tuple[str, ...] = (), maxtext: str | None = None, expose: str | None = None,
         fix: str = "", derived_from: str = "", internal: bool = False, unit: str = "",
         resolved_default: str = "") -> Any:
    """One row of the table. `low`/`high` bound numbers (inclusive; `low_open`/`high_open` exclude the
    bound itself); `fix` ends a bounds message (for text: what a blank value should have been); `repeatable` makes a flag given once per value (a tuple;
    its env var is comma-separated); `derived_from` says which launcher flags a LAUNCHER_DERIVED setting
    is rendered from; `internal` marks a value the trainer resolves itself: no flag, no env var, but kept
    in run.json; `unit` ("seconds") names what a number counts: a float bounded below by 0 is refused as
    "not a positive number of seconds", and the launcher's flag shows SECONDS; `resolved_default` is what the
    docs show as the default of a None the trainer fills in from other settings."""
    return field(default=default, metadata={"help": help, "low": low, "high": high, "low_open": low_open,
                                            "high_open": high_open, "repeatable": repeatable,
                                            "choices": choices, "maxtext": maxtext, "expose": expose,
                                            "fix": fix, "derived_from": derived_from, "internal": internal,
                                            "unit": unit, "resolved_default": resolved_default})


def _beside(run_dir: str, name: str) -> str:
    """RUN_DIR/name: joined as text for a URL (pathlib makes gs://b/r a local folder gs:/b/r)."""
    return f"{run_dir.rstrip('/')}/{name}" if "://" in run_dir else str(Path(run_dir) / name)


@dataclass(frozen=True)
class TrainerConfig:
    # Run layout.
    run_dir: str = _opt("elxpk-run", "directory for metrics.jsonl, events.jsonl, run.json: local, or gs:// (there "
                                     "as append-only chunks, see --record-flush-seconds)",
                        fix="give a directory, e.g. elxpk-run or gs://bucket/run")
    record_flush_seconds: float = _opt(30.0, "with --run-dir on an object store, upload the held records at least "
                                             "this often (a killed process loses at most this long of them)",
                                       low=0.1, high=3600.0, unit=SECONDS,
                                       fix="seconds between uploads of the records, e.g. 30")
    checkpoint_dir: str | None = _opt(None, "checkpoint directory (default RUN_DIR/checkpoints)",
                                      maxtext="checkpoint_dir", expose=LAUNCHER_FLAG,
                                      resolved_default="RUN_DIR/checkpoints",
                                      fix="give a directory (default RUN_DIR/checkpoints), e.g. "
                                          "gs://bucket/run/checkpoints")
    steps: int = _opt(200, "number of train steps", maxtext="steps", expose=LAUNCHER_FLAG, low=1)
    checkpoint_period: int = _opt(100, "save a checkpoint every this many steps", low=1,
                                  maxtext="checkpoint_period", expose=LAUNCHER_FLAG,
                                  fix="steps between checkpoints, e.g. 100")
    max_to_keep: int = _opt(3, "checkpoints kept on disk (>= 2, so a corrupt newest one has a fallback)", low=2,
                            fix="keep at least 2 so a corrupt newest checkpoint has a valid predecessor")
    compilation_cache_dir: str | None = _opt(
        None, "jax's persistent compilation cache, which every restart reads so that it loads the step instead "
              "of compiling it again (local or gs://); a bad or unreadable entry is compiled again; off: none. "
              "Not given, a JAX_COMPILATION_CACHE_DIR in the environment wins over the default",
        maxtext="jax_cache_dir", expose=LAUNCHER_FLAG, resolved_default="beside CHECKPOINT_DIR: its sibling xla-cache",
        fix="give a directory, e.g. gs://bucket/run/xla-cache, or off")
    seed: int = _opt(0, "seed of the parameters, the data and the per-step RNG", low=0, high=2**32 - 1,
                     expose=LAUNCHER_FLAG)
    # Speed and profiling (trainer/speed_log.py, profile_capture.py): MaxText's names, not passed to MaxText (its
    # log_period is a TensorBoard period, its profiler's off is ""): with --trainer maxtext they go in --command.
    log_period: int = _opt(1, "print the speed line (step, seconds, TFLOP/s per device, tokens/s, MFU against the "
                              "chip's bf16 peak, loss) every this many steps, over the steps since the last "
                              "one; 0: never. The progress record and the records carry the speed either way",
                           low=0, expose=LAUNCHER_FLAG,
                           fix="steps between speed lines, e.g. 10; 0 for none")
    profiler: str = _opt("off", "xplane: capture a jax.profiler trace of --profiler-steps steps into "
                                "RUN_DIR/profile, readable by TensorBoard or XProf (tensorboard --logdir "
                                "RUN_DIR/profile); off: none. Process 0's steps, once per process",
                         choices=PROFILERS, expose=LAUNCHER_FLAG)
    skip_first_n_steps_for_profiler: int = _opt(1, "steps a process runs before its --profiler trace starts (its "
                                                   "compile comes before its first step either way)", low=0,
                                                expose=LAUNCHER_FLAG, fix="steps to run before the trace, e.g. 1")
    profiler_steps: int = _opt(5, "steps the --profiler trace captures", low=1, expose=LAUNCHER_FLAG,
                               fix="steps to trace, e.g. 5")
    # Topology.
    num_slices: int = _opt(2, "number of slices", low=1, expose=LAUNCHER_DERIVED, derived_from="`--num-slices`")
    devices_per_slice: int = _opt(2, "devices per slice (CPU: virtual XLA host devices)", low=1)
    slice_backend: str = _opt("simulated", "simulated | pathways | multi-controller", choices=BACKENDS,
                              expose=LAUNCHER_DERIVED,
                              derived_from="`pathways` by default, `multi-controller` with `--no-pathways`")
    # Elastic retry loop (MaxText names).
    elastic_enabled: bool = _opt(False, "retry in the same process after a slice loss", maxtext="elastic_enabled",
                                 expose=LAUNCHER_DERIVED, derived_from="`true` when `--elastic-slices` > 0")
    elastic_min_slice_count: int = _opt(-1, "healthy slices each attempt waits for: -1 all of them (pause and "
                                            "resume); k from 1 to num_slices - 1 resizes onto >= k slices",
                                        maxtext="elastic_min_slice_count", expose=LAUNCHER_FLAG)
    elastic_timeout_seconds: int = _opt(300, "seconds one attempt waits for enough healthy slices", low=1,
                                        maxtext="elastic_timeout_seconds", expose=LAUNCHER_FLAG, unit=SECONDS,
                                        fix="whole seconds to wait for slices on each attempt, e.g. 300")
    elastic_max_retries: int = _opt(10, "total attempts, counted like pathwaysutils (1 = no retry)", low=1,
                                    maxtext="elastic_max_retries", expose=LAUNCHER_FLAG,
                                    fix="trainer attempts, e.g. 10")
    elastic_stop_on_repeat: int = _opt(0, "stop retrying after this many failures in a row of one class (its exit "
                                          "code: slice_lost, stalled) with no step past the first one's, with "
                                          "that class's exit code; 0: off (only --elastic-max-retries stops)",
                                       low=0, expose=LAUNCHER_FLAG,
                                       fix="failures of one cause in a row, e.g. 3; 0 turns it off")
    run_id: str | None = _opt(None, "this run's identity (e.g. its JobSet's UID), the same for every group restart "
                                    "of the run: an attempt history (CHECKPOINT_DIR/elxpk-attempts.json) written "
                                    "under another id is set aside with a warning; unset: the history is "
                                    "shared by whatever runs on the checkpoint directory",
                              fix="give the run's id, e.g. its JobSet's UID, or leave it unset")
    elastic_poll_seconds: float = _opt(1.0, "how often the wait for slices probes them", low=0.0, low_open=True,
                                       unit=SECONDS)
    restore_timeout_seconds: float = _opt(1800.0, "seconds a checkpoint restore may take, its retries of transient "
                                                  "storage failures included, before the run counts as stalled "
                                                  "(exit 76, every step left in place); a read that hangs ends here",
                                          low=0.0, low_open=True, unit=SECONDS,
                                          fix="seconds a restore may take, e.g. 1800")
    stall_timeout_seconds: float = _opt(0.0, "seconds without a completed step before the run counts as stalled "
                                             "(stacks dumped, then treated as a lost slice); 0: auto, max(600, 20 x "
                                             "the median step interval), see elxpk_contract/stall.py", low=0.0,
                                        expose=LAUNCHER_FLAG, unit=SECONDS,
                                        fix="seconds without a step before a stall, e.g. 1800; 0 for auto")
    termination_grace_seconds: float = _opt(30.0, "seconds between a SIGTERM and the kubelet's SIGKILL (the pod's "
                                                  "terminationGracePeriodSeconds, which a pod cannot read): a stop "
                                                  "saves on the way out only where what is left of them covers the "
                                                  "save (trainer/elastic/drain.py)",
                                            low=0.0, unit=SECONDS, expose=LAUNCHER_DERIVED,
                                            derived_from="`--termination-grace-period-seconds`",
                                            fix="the pod's grace period in seconds, e.g. 30")
    recovery: str = _opt("live", "where a slice loss resumes from: live, the surviving slices' copy of the last "
                                 "completed step (no rewind; multi-controller always falls back to the "
                                 "checkpoint, since jax aborts the survivors), or checkpoint, the newest "
                                 "valid checkpoint (the step then donates its input state: one state share "
                                 "less per device)", choices=RECOVERIES, expose=LAUNCHER_FLAG)
    # Model, data and optimiser (all part of the checkpoint fingerprint).
    global_batch: int = _opt(16, "examples per step, constant when the slice count changes", low=1,
                             expose=LAUNCHER_FLAG)
    model: str = _opt(DEFAULT_MODEL, "model preset (Llama-like shapes, elxpk_contract/presets.py); each shape "
                                     "flag given (--d-model, ...) overrides its preset value", expose=LAUNCHER_FLAG,
                      choices=tuple(MODEL_PRESETS))
    # The shape settings default to None, "from the --model preset"; __post_init__ resolves them, so a
    # constructed config always holds ints (precedence: flag/env > preset > the default preset).
    seq_len: int = _opt(None, "tokens per example (default: from --model)", low=1)
    vocab_size: int = _opt(None, "vocabulary size; every data token must be below it (default: from --model)",
                           low=1)
    d_model: int = _opt(None, "model width (default: from --model)", low=1)
    n_layers: int = _opt(None, "transformer blocks (default: from --model)", low=1)
    n_heads: int = _opt(None, "attention heads (default: from --model)", low=1)
    d_ff: int = _opt(None, "MLP hidden width (default: from --model)", low=1)
    compute_dtype: str = _opt("auto", "dtype of the forward and backward matmuls; master params, optimizer "
                                      "state, softmax and loss stay float32 (the logits: --logits-dtype); auto: bfloat16 on GPU "
                                      "and TPU, float32 on CPU", expose=LAUNCHER_FLAG, choices=COMPUTE_DTYPES)
    attention: str = _opt("auto", "attention kernel: auto is splash (Pallas, causal) on TPU from 128 tokens, "
                                  "cuDNN's flash kernel on GPU in bfloat16, XLA's elsewhere (MaxText's "
                                  "autoselected); part of the checkpoint fingerprint unless xla",
                          expose=LAUNCHER_FLAG, choices=ATTENTIONS)
    remat_policy: str = _opt("auto", "what each block keeps for the backward pass, the rest recomputed: none "
                                     "(everything), minimal_with_context, minimal (every matmul output), save_dot_except_mlp, "
                                     "save_qkv_proj, full (only the block input), MaxText's names; auto: the "
                                     "first of those whose memory estimate fits the device; the same bits "
                                     "whichever, so not in the fingerprint",
                             expose=LAUNCHER_FLAG, choices=REMAT_POLICIES)
    logits_dtype: str = _opt("auto", "the dtype the logits leave their matmul in (accumulated in float32, the "
                                     "softmax and the loss float32 either way): auto, the compute dtype (MaxText's "
                                     "default, logits_dot_in_fp32 false: on a v5e at 125m 1.5 points of MFU more "
                                     "than float32); float32 (logits_dot_in_fp32 true); part of the checkpoint "
                                     "fingerprint where it changes the numbers", expose=LAUNCHER_FLAG,
                             choices=LOGITS_DTYPES)
    gradient_accumulation_steps: int = _opt(1, "microbatches a step's batch is cut into, run one after the other "
                                                "and their gradients summed in one fixed order: activations for "
                                                "one microbatch at a time (less --remat-policy recompute at a large "
                                                "--global-batch); the per-device batch must divide by it. It fixes "
                                                "the order of the sums, so it is kept with the run like "
                                                "--global-batch: a resize or resume stays bitwise at any value",
                                            low=1, maxtext="gradient_accumulation_steps", expose=LAUNCHER_FLAG,
                                            fix="microbatches per step, e.g. 1 (none) or 4")
    data: str | None = _opt(None, "tokenized training data: a .npy file of one 1-D uint16/uint32 token stream, "
                                  "or .array_record file(s) of token chunks (comma-separated), local or gs://; "
                                  "default: synthetic tokens (see docs/trainer.md)", expose=LAUNCHER_FLAG,
                            fix="give a .npy file or .array_record files")
    dataset_identity: str = _opt("synthetic-v1", "what the data is, as the trainer found it when opening it "
                                                 "(path, token dtype and count, content hash): part of the "
                                                 "checkpoint fingerprint", internal=True)
    dropout: float = _opt(0.1, "dropout rate in [0, 1) (the per-step RNG is fold_in(seed, step))", low=0.0,
                          high=1.0, high_open=True)
    learning_rate: float = _opt(3e-3, "peak learning rate", low=0.0)
    warmup_steps: int = _opt(20, "linear warm-up steps", low=0)
    decay_steps: int = _opt(1000, "cosine decay horizon in steps (independent of --steps)", low=1)
    weight_decay: float = _opt(0.01, "AdamW weight decay", low=0.0)
    deterministic_reduction: str = _opt("on", "on: the gradient is summed over fixed per-slice shards in one order, "
                                              "so a resize is bitwise equal to an uninterrupted run; off: XLA's "
                                              "all-reduce over the active slices (docs/trainer.md)",
                                        choices=("on", "off"))
    # Simulated faults (simulated backend; multi-controller kills its own process).
    fault: tuple[str, ...] = _opt((), "inject a fault: K@STEP, K@mid:STEP, K@data:STEP, K@save:STEP, K@hang:STEP, K@restore "
                                                 "[+REVIVE_STEP]", repeatable=True)
    revive_after: float | None = _opt(None, "seconds until a killed slice comes back (default: never)", low=0.0)
    # --compile-only (ACTIONS).
    compile_topology: str = _opt("v5e:2x2", "the TPU slice --compile-only compiles the step for, in jax's "
                                            "GENERATION:TOPOLOGY form (v5e:4x4, v5p:2x2x2); --num-slices of them",
                                 fix="give a TPU slice as jax names it, e.g. v5e:4x4")
    compile_chip_bytes: int = _opt(0, "the HBM of one chip of --compile-topology that --compile-only plans "
                                                "for (--remat-policy auto picks by its device's share; `workload "
                                                "create --check-fit` passes the catalog's); 0: unknown, auto then "
                                                "keeps everything (none)", low=0)
    compile_fewest_slices: bool = _opt(True, "with resizes on (--elastic-min-slice-count), --compile-only also "
                                             "compiles the step on the fewest slices a run may train on (its "
                                             "report's fewest_slices); `workload create --check-fit` turns it "
                                             "off: its decision is the full width's (a second compile saved)")
    compile_executables: str | None = _opt(None, "with --compile-only, also write the compiled steps (the "
                                                 "workload's, and with resizes on the fewest slices') into this "
                                                 "executable store, the run's `<compilation cache>-executables` "
                                                 "(e.g. gs://bucket/run/xla-cache-executables): the run's "
                                                 "processes load them instead of compiling where their key "
                                                 "matches the hardware (a miss compiles as before); unset: "
                                                 "nothing written",
                                           fix="give the run's executable store, e.g. "
                                               "gs://bucket/run/xla-cache-executables")
    # Multi-controller backend.
    process_id: int = _opt(0, "this process's index (multi-controller)", low=0)
    num_processes: int = _opt(1, "number of processes, one per slice (multi-controller)", low=1)
    coordinator: str | None = _opt(None, "jax.distributed coordinator HOST:PORT (multi-controller; omit on a "
                                         "TPU cluster, where jax detects it)",
                                   fix="give HOST:PORT, e.g. 127.0.0.1:8476")
    heartbeat_timeout_seconds: int = _opt(10, "jax.distributed heartbeat timeout (multi-controller)", low=1,
                                          unit=SECONDS)

    def __post_init__(self) -> None:
        if self.checkpoint_dir is None:
            object.__setattr__(self, "checkpoint_dir", _beside(self.run_dir, "checkpoints"))
        object.__setattr__(self, "fault", tuple(self.fault))
        for name in SHAPE_SETTINGS:
            if getattr(self, name) is None:
                object.__setattr__(self, name, preset_value(self.model, name))
        problems = self.problems()
        if problems:
            raise UsageError(*problems)

    def problems(self) -> list[str]:
        """Every validation message (empty when the config is usable)."""
        from elxpk_contract.faults import (
            FaultSchedule,  # lazy: keeps the fault parser off `workload create --dry-run`
        )

        p = [m for f in dataclasses.fields(self) if (m := bounds_problem(f.name, getattr(self, f.name)))]
        p.extend(cross_problems(self.num_slices, self.elastic_min_slice_count))
        if "://" in self.run_dir and not self.run_dir.startswith("gs://"):
            p.append(f"{said('run_dir')} {self.run_dir!r:.200}: the records go to a local directory or to gs://; give "
                     "one of those, e.g. gs://bucket/run")
        if not _TPU_SLICE.fullmatch(self.compile_topology):
            p.append(f"{said('compile_topology')} {self.compile_topology!r:.100}: name a TPU slice as jax does, "
                     "GENERATION:TOPOLOGY, e.g. v5e:4x4 or v5p:2x2x2 (elxpk's v5litepod-16 is v5e:4x4)")
        if self.d_model % max(self.n_heads, 1):
            p.append(f"{said('n_heads')} {self.n_heads}: must divide {said('d_model')} {self.d_model}")
        if not self.topology_from_hardware:
            p.extend(self.batch_problems(self.devices_per_slice))
        p.extend(self._controller_problems())
        try:
            p.extend(FaultSchedule.parse(self.fault, self.revive_after).problems(self.num_slices, self.steps))
        except ValueError as exc:
            p.extend(str(exc).splitlines())
        return p

    def batch_problems(self, devices_per_slice: int, where: str = "") -> list[str]:
        """The global batch must split evenly over every device of every slice count a run may reach.
        The loop ends at the first count that does not divide it (a small one for any batch), so even an
        absurd --num-slices costs little; the hint names a multiple only where there are few counts."""
        counts = self.slice_counts()
        for n in counts:
            if n >= 1 and self.global_batch % (n * max(devices_per_slice, 1) * self.gradient_accumulation_steps):
                hint = (f"use a multiple of {self._batch_multiple(devices_per_slice)}" if len(counts) <= 64 else
                        f"use fewer slices or a higher {said('elastic_min_slice_count')}")
                micro = self.gradient_accumulation_steps
                cut = f" x {said('gradient_accumulation_steps')} {micro}" if micro > 1 else ""
                return [f"{said('global_batch')} {self.global_batch}: must divide evenly over {n} slice(s) x "
                        f"{devices_per_slice} devices{cut}{where}; {hint}"]
        return []

    def _controller_problems(self) -> list[str]:
        p = []
        if self.slice_backend != "multi-controller":
            if self.coordinator is not None:
                p.append(f"{said('coordinator')} {self.coordinator}: only with {said('slice_backend')} multi-controller")
            return p
        if self.coordinator is None:
            # On a TPU cluster jax detects the process and the process count; a half-given layout is a mistake.
            for name, default in (("process_id", 0), ("num_processes", 1)):
                if getattr(self, name) != default:
                    p.append(f"{said(name)} {getattr(self, name)}: give it only together with {said('coordinator')} "
                             "(without one, jax detects the processes of the TPU cluster)")
            return p
        host, _, port = self.coordinator.rpartition(":")
        number = ascii_number(port)  # `²` and `٣` pass str.isdigit()
        if not host or number is None or not 0 < number < 65536:
            p.append(f"{said('coordinator')} {self.coordinator!r}: use HOST:PORT, e.g. 127.0.0.1:8476")
        if self.num_processes != self.num_slices:
            p.append(f"{said('num_processes')} {self.num_processes}: must equal {said('num_slices')} {self.num_slices} "
                     f"(one slice per process with {said('coordinator')})")
        if not 0 <= self.process_id < self.num_processes:
            p.append(f"{said('process_id')} {self.process_id}: must be in 0..{self.num_processes - 1}")
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
            problems.append(f"{said('num_slices')} {self.num_slices}: {where} has {num_slices} slice(s); set {said('num_slices')} "
                            f"(ELXPK_NUM_SLICES) to {num_slices}")
        problems.extend(self.batch_problems(devices_per_slice, f" ({where} has {devices_per_slice} per slice)"))
        if problems:
            raise UsageError(*problems)
        if devices_per_slice == self.devices_per_slice:
            return self
        return dataclasses.replace(self, devices_per_slice=devices_per_slice)

    def slice_counts(self) -> range:
        """Every slice count a run may train on: the global batch must divide over each of them."""
        low = slices_waited_for(self.elastic_min_slice_count, self.num_slices)
        # Clamped: an out-of-range count is refused by cross_problems, and must not make this range huge.
        return range(min(max(low, 1), self.num_slices), self.num_slices + 1)

    def _batch_multiple(self, devices_per_slice: int) -> int:
        return lcm(*(n * devices_per_slice * self.gradient_accumulation_steps for n in self.slice_counts()))

    @property
    def checkpoint_path(self) -> str:
        """`checkpoint_dir` as resolved (RUN_DIR/checkpoints unless given): never None after __init__."""
        return self.checkpoint_dir if self.checkpoint_dir is not None else _beside(self.run_dir, "checkpoints")

    @property
    def checkpoint_flag(self) -> str:
        """The setting that names the checkpoint directory, for a message: run_dir when it is RUN_DIR/checkpoints
        (the default), else checkpoint_dir."""
        return "run_dir" if self.checkpoint_path == _beside(self.run_dir, "checkpoints") else "checkpoint_dir"

    @property
    def resize_enabled(self) -> bool:
        return slices_waited_for(self.elastic_min_slice_count, self.num_slices) < self.num_slices

    @property
    def min_slices(self) -> int:
        return slices_waited_for(self.elastic_min_slice_count, self.num_slices)

    def fingerprint(self) -> str:
        """Hash of what makes a checkpoint meaningful: model, batch, seed, data and optimiser."""
        return hashlib.sha256(json.dumps(self.fingerprint_fields(), sort_keys=True).encode()).hexdigest()[:16]

    def fingerprint_fields(self) -> dict:
        names = ("global_batch", "seq_len", "vocab_size", "d_model", "n_layers", "n_heads", "d_ff",
                 "dropout", "learning_rate", "warmup_steps", "decay_steps", "weight_decay", "seed")
        # compute_dtype as the trainer resolved it: a bf16 checkpoint must not resume in f32 compute. float32
        # is the historical format and adds no key (older checkpoints stay resumable); "auto" in a config not
        # yet run counts as float32, what it resolves to on CPU, where `local run` pre-checks a resume. The
        # model preset is not here: the shape it resolved to is.
        precision = {} if self.compute_dtype in ("auto", "float32") else {"compute_dtype": self.compute_dtype}
        # The attention kernel as resolved, likewise: XLA's (and "auto" not yet run, XLA's on CPU) adds no key;
        # splash and cuDNN round differently from it, so a resume must not switch kernels silently.
        if self.attention not in ("auto", "xla"):
            precision["attention"] = self.attention
        # Logits rounded to the compute dtype change the numbers only where it is not float32.
        if precision.get("compute_dtype") not in (None, "float32") and self.logits_dtype == "auto":
            precision["logits"] = precision["compute_dtype"]
        return {"dataset": self.dataset_identity, **precision, **{n: getattr(self, n) for n in names}}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """What `python -m trainer --print-config` prints: every setting, sorted keys, JSON types."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=2)
