"""The MaxText config keys elxpk writes or reads, vendored from MaxText 0.2.5.

Upstream: the `maxtext==0.2.5` wheel on PyPI (https://github.com/AI-Hypercomputer/maxtext), files
`maxtext/configs/base.yml` (defaults), `maxtext/configs/types.py` (pydantic types and the cross-field
checks in `MaxTextConfig`), `maxtext/utils/elastic_utils.py` (how the elastic keys reach pathwaysutils
0.1.13's `Manager.elastic_retry`) and `maxtext/common/checkpointing.py` (`step % checkpoint_period`).
`tests/maxtext/test_wheel.py` downloads that wheel and checks every row below against it.

Only `default` and `pydantic_type` are copied; `low`/`sentinel` are the ranges MaxText or pathwaysutils
enforce (or crash on) at run time, with `rule` saying where. Standard library only (render path).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAXTEXT_VERSION = "0.2.5"
UPSTREAM = "maxtext==0.2.5 wheel: maxtext/configs/base.yml and maxtext/configs/types.py"


@dataclass(frozen=True)
class MaxTextKey:
    name: str
    kind: str  # "bool" | "int" | "str": how base.yml's value reads (yaml.safe_load)
    default: object  # base.yml's value
    pydantic_type: str  # the annotation in types.py, as written there
    doc: str
    low: int | None = None  # smallest value MaxText runs with
    sentinel: int | None = None  # a special value below `low` (elastic_min_slice_count -1: all slices)
    choices: tuple[str, ...] = ()
    rule: str = ""  # where `low`/`choices` come from

    def problem(self, value: object) -> str | None:
        """Why MaxText would refuse `value` (already converted to `kind`), or None."""
        if self.choices and value not in self.choices:
            return f"MaxText accepts {', '.join(self.choices)}"
        if self.low is not None and isinstance(value, int) and not isinstance(value, bool):
            if value < self.low and value != self.sentinel:
                also = f" or {self.sentinel}" if self.sentinel is not None else ""
                return f"MaxText needs at least {self.low}{also} ({self.rule})"
        return None


def _k(name, kind, default, pydantic_type, doc, **rest) -> MaxTextKey:
    return MaxTextKey(name, kind, default, pydantic_type, doc, **rest)


KEYS: dict[str, MaxTextKey] = {k.name: k for k in (
    # Where a run writes: base_output_directory/run_name/{checkpoints,metrics,tensorboard}/ (types.py).
    _k("base_output_directory", "str", "", "PathStr", "base directory of every run's outputs"),
    _k("run_name", "str", "", "str", "run directory under base_output_directory; empty: $JOBSET_NAME"),
    _k("enable_checkpointing", "bool", True, "bool", "save checkpoints"),
    _k("checkpoint_period", "int", 10_000, "int", "steps between checkpoints", low=1,
       rule="common/checkpointing.py saves when step % checkpoint_period == 0"),
    # jax's persistent compilation cache; MaxText turns it on when the value is not empty (pyconfig.py).
    _k("jax_cache_dir", "str", "~/jax_cache", "PathStr | None", "compilation cache directory; empty: none"),
    _k("metrics_file", "str", "", "None | PathStr", "local JSON-lines file of scalar metrics; empty: none"),
    # Data: only grain checkpoints its position; only the elastic iterator survives a resize.
    _k("dataset_type", "str", "synthetic", "DatasetType", "input pipeline",
       choices=("synthetic", "hf", "grain", "tfds", "c4_mlperf", "olmo_grain"),
       rule="types.py DatasetType"),
    _k("grain_use_elastic_iterator", "bool", False, "bool",
       "grain ElasticIterator: its checkpoint restores onto another number of data shards"),
    _k("grain_file_type", "str", "arrayrecord", "str", "grain file format (elastic iterator: arrayrecord)"),
    _k("packing", "bool", True, "bool", "pack sequences (the elastic iterator needs packing=false)"),
    _k("use_truncation", "bool", True, "bool", "truncate long examples (the elastic iterator needs true)"),
    _k("grain_train_files", "str", "", "PathStr", "grain training files; ';' separates a mixture"),
    _k("grain_train_mixture_config_path", "str", "", "PathStr", "JSON data mixture (not with the elastic "
       "iterator)"),
    _k("steps", "int", 150_001, "int", "train steps; -1: learning_rate_schedule_steps", low=-1,
       rule="types.py steps: Field(ge=-1)"),
    _k("gradient_accumulation_steps", "int", 1, "PositiveInt", "microbatches a step accumulates", low=1,
       rule="types.py gradient_accumulation_steps: PositiveInt"),
    # Pathways and elasticity (types.py ElasticTraining; "Elastic training is Pathways-specific").
    _k("enable_single_controller", "bool", False, "bool", "single-controller (Pathways) mode"),
    _k("elastic_enabled", "bool", False, "bool", "retry training in the same process after a slice loss"),
    _k("elastic_backup_kind", "str", "snapshot", "str", "what an elastic retry restores from",
       choices=("snapshot", "checkpoint"), rule="types.py MaxTextConfig checks"),
    _k("elastic_timeout_seconds", "int", 300, "int", "seconds each attempt waits for enough slices", low=1,
       rule="pathwaysutils wait_for_slices times out after its first probe when the timeout is 0 or less"),
    _k("elastic_max_retries", "int", 10, "int", "total attempts", low=1,
       rule="pathwaysutils ElasticRetryLimit: max_attempts must be positive"),
    _k("elastic_min_slice_count", "int", -1, "int", "slices each attempt waits for; -1: all of them", low=1,
       sentinel=-1,
       rule="elastic_utils passes -1 as None, all slices; pathwaysutils takes 0 as met by no slice"),
    # Model configs (configs/models/NAME.yml) that set a key elxpk writes make MaxText refuse a different
    # CLI value unless override_model_config=true (pyconfig.validate_no_keys_overridden_twice).
    _k("model_name", "str", "default", "ModelName", "model config to load from configs/models/"),
    _k("override_model_config", "bool", False, "bool", "let CLI values win over the model config"),
)}

# configs/models/*.yml in 0.2.5 that set a key elxpk may write, with the value they set.
MODEL_CONFIG_KEYS: dict[str, dict[str, object]] = {
    "gpt3-175b": {"checkpoint_period": 10_000},
}

# MaxText reads `M_<KEY>` environment variables too, and refuses a key set both there and on the CLI.
ENV_PREFIX = "M_"

# Messages of MaxText's own refusals that elxpk reproduces before submitting (types.py, 0.2.5).
SINGLE_CONTROLLER_RULE = "Elastic training is only supported with Pathways (`enable_single_controller=True`)."
ELASTIC_ITERATOR_PACKING_RULE = "`grain_use_elastic_iterator=True` requires `packing=False`."
# The elastic iterator's other start-up refusals (types.py, 0.2.5), as their messages begin.
ELASTIC_ITERATOR_RULES = (
    "`grain_use_elastic_iterator=True` only supports `grain_file_type=arrayrecord`.",
    ELASTIC_ITERATOR_PACKING_RULE,
    "`grain_use_elastic_iterator=True` requires `use_truncation=True`.",
    "`grain_use_elastic_iterator=True` does not support dataset mixtures.",
)

_TRUE = ("true", "1", "yes", "on", "t", "y")
_FALSE = ("false", "0", "no", "off", "f", "n")


def parse_value(key: str, text: str) -> object:
    """`text` as MaxText reads a CLI value of `key` (OmegaConf's YAML, then pydantic's lax coercion).

    Raises ValueError with a short reason when MaxText would refuse it.
    """
    kind = KEYS[key].kind
    t = text.strip()
    if kind == "bool":
        if t.lower() in _TRUE:
            return True
        if t.lower() in _FALSE:
            return False
        raise ValueError("use true or false")
    if kind == "int":
        try:
            digits = t.replace("_", "")
            number = float(digits) if "." in t or "e" in t.lower() else int(digits, 10)
        except ValueError:
            raise ValueError("must be a whole number") from None
        if isinstance(number, float):
            if not number.is_integer():
                raise ValueError("must be a whole number")
            number = int(number)
        return number
    return read_text(text)


# Text written as is: starts with a letter or '/', then letters, digits and `_ . / : @ + -`, a `:` never
# last (`gs://bkt/x:` is a YAML mapping), so no YAML indicator, number, boolean or null can match, except
# the words below.
_PLAIN = re.compile(r"[A-Za-z/](?:[A-Za-z0-9_./@+-]|:(?=.))*\Z")
_YAML_WORDS = frozenset("y n yes no on off true false null none nan inf".split())


def yaml_text(value: str) -> str:
    """`value` as the YAML scalar OmegaConf reads back as exactly `value` (MaxText reads each CLI value with
    OmegaConf's YAML loader): as is when plainly text, else single-quoted. Raises ValueError for what no
    quoting keeps: `${` (an OmegaConf interpolation, quoted or not) and line breaks (YAML folds them)."""
    if "${" in value:
        raise ValueError("MaxText (OmegaConf) reads ${...} as an interpolation; use a literal path")
    if not value.replace(" ", "").isprintable():
        raise ValueError("it holds a line break or non-printing character, which MaxText's YAML reader changes "
                         "or refuses")
    if _PLAIN.match(value) and value.lower() not in _YAML_WORDS:
        return value
    return "'" + value.replace("'", "''") + "'"


def read_text(text: str) -> str:
    """A CLI value of a text key as MaxText reads it (YAML). Raises ValueError when YAML reads no text."""
    import yaml  # the launcher's own dependency; loaded only when a command sets a text key

    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS:
        return text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ValueError("YAML cannot read it; quote it as '...'") from None
    if not isinstance(value, str):
        what = "nothing" if value is None else type(value).__name__
        raise ValueError(f"YAML reads it as {what}, not text; quote it as '...'")
    return value


def render_value(value: object) -> str:
    """A Python value as the CLI text MaxText reads back as the same value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return yaml_text(value)
    return str(value)
