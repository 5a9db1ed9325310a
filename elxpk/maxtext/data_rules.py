"""What a MaxText command's data settings mean for elastic training (docs/maxtext.md, "Data").

- `elastic_iterator_errors`: grain's elastic iterator (`grain_use_elastic_iterator=true`) has start-up rules
  of its own in MaxText 0.2.5 (types.py): packing=false, grain_file_type=arrayrecord, use_truncation=true
  and no data mixture. MaxText refuses a command that breaks one whether elasticity is on or not, so elxpk
  refuses it too, before submitting.
- `data_order_warnings`: the Olmo lesson. Only grain checkpoints the data position, and only its elastic
  iterator restores it onto another slice count; anything else may repeat or skip examples.

Standard library only (render path).
"""

from __future__ import annotations

from elxpk.maxtext import command as cmd
from elxpk.maxtext.keys import ELASTIC_ITERATOR_RULES, KEYS, parse_value

DATA_FIX = ("dataset_type=grain", "grain_use_elastic_iterator=true")


def command_value(inv: cmd.Invocation, key: str) -> object:
    """The value --command gives `key`, else MaxText's default; None when the shell decides it or MaxText
    would not read it (that word is reported on its own)."""
    word = inv.overrides.get(key)
    if word is None:
        return KEYS[key].default
    if word.dynamic:
        return None
    try:
        return parse_value(key, word.value.split("=", 1)[1])
    except ValueError:
        return None


def _config_note(inv: cmd.Invocation) -> str:
    stock = inv.config is None or inv.config.value.endswith("configs/base.yml")  # its values are vendored
    return "" if stock or inv.config is None else f" (elxpk cannot see inside {inv.config.value})"


# (key, the value the elastic iterator needs, the fix, index into ELASTIC_ITERATOR_RULES)
_ITERATOR_NEEDS = (
    ("grain_file_type", "arrayrecord", "set grain_file_type=arrayrecord (convert the data to ArrayRecord)", 0),
    ("packing", False, "add packing=false", 1),
    ("use_truncation", True, "drop use_truncation=false", 2),
)


def elastic_iterator_errors(inv: cmd.Invocation) -> list[str]:
    """MaxText's start-up refusals of the elastic iterator's settings, one line each (exit 2). A key the
    command leaves to a config file other than the stock base.yml is not judged: that file may set it."""
    if command_value(inv, "grain_use_elastic_iterator") is not True:
        return []
    out = []
    unseen = bool(_config_note(inv))
    for key, needed, fix, rule in _ITERATOR_NEEDS:
        word = inv.overrides.get(key)
        if (word is None and unseen) or (word is not None and word.dynamic):
            continue
        if command_value(inv, key) != needed:
            given = f"sets {word.raw}" if word is not None else f"keeps {key}={KEYS[key].default} (base.yml)"
            out.append(f"--command sets grain_use_elastic_iterator=true and {given}; MaxText refuses that at "
                       f"start-up ({ELASTIC_ITERATOR_RULES[rule]}); {fix}")
    files = command_value(inv, "grain_train_files")
    mixture = command_value(inv, "grain_train_mixture_config_path")
    if (isinstance(files, str) and ";" in files) or mixture:
        what = "a data mixture (';' in grain_train_files)" if not mixture else "grain_train_mixture_config_path"
        out.append(f"--command sets grain_use_elastic_iterator=true with {what}; MaxText refuses that at "
                   f"start-up ({ELASTIC_ITERATOR_RULES[3]}); use a single grain_train_files pattern")
    return out


def data_order_warnings(inv: cmd.Invocation) -> list[str]:
    """Warnings for an elastic run whose data position a restore or resize may not keep."""
    dataset = command_value(inv, "dataset_type")
    iterator = command_value(inv, "grain_use_elastic_iterator")
    if dataset == "grain" and iterator is True:
        return []
    what = ("grain without grain_use_elastic_iterator=true" if dataset == "grain" else
            f"dataset_type={dataset}" if dataset is not None else "a dataset_type the shell decides")
    risk = ("a restore or resize may repeat or skip data: MaxText checkpoints the data position only "
            "with dataset_type=grain" if dataset != "grain" else
            "a resize may repeat or skip data: only grain's elastic iterator restores the data position "
            "onto another slice count")
    return [f"--command reads {what}{_config_note(inv)} with elastic training on; {risk}. Add "
            f"{' '.join(DATA_FIX)} to --command (the elastic iterator also needs packing=false)"]
