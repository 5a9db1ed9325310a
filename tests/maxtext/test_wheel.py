"""The vendored MaxText key table, and every key elxpk writes, against the pinned MaxText wheel itself.

Downloads `maxtext==0.2.5` (about 14 MB; the wheel needs Python >= 3.12 to install, so it is downloaded for
3.12 and read as a zip, never installed). Skipped only when the package index cannot be reached.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from elxpk.maxtext.command import find_invocations
from elxpk.maxtext.keys import (
    ELASTIC_ITERATOR_PACKING_RULE,
    ELASTIC_ITERATOR_RULES,
    KEYS,
    MAXTEXT_VERSION,
    MODEL_CONFIG_KEYS,
    SINGLE_CONTROLLER_RULE,
)
from elxpk.maxtext.overrides import maxtext_overrides

pytestmark = pytest.mark.slow

OFFLINE = ("NewConnectionError", "Network is unreachable", "Name or service not known",
           "Temporary failure in name resolution", "ConnectTimeout", "Max retries exceeded", "ProxyError",
           "Connection refused", "No route to host")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    dest = tmp_path_factory.mktemp("maxtext-wheel")
    run = subprocess.run(
        [sys.executable, "-m", "pip", "download", f"maxtext=={MAXTEXT_VERSION}", "--no-deps", "--only-binary=:all:",
         "--python-version", "3.12", "--retries", "1", "--timeout", "30", "--disable-pip-version-check",
         "-d", str(dest)],
        capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        if any(s in run.stdout + run.stderr for s in OFFLINE):
            pytest.skip(f"the package index is unreachable: {run.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"pip download maxtext=={MAXTEXT_VERSION} failed:\n{run.stderr}")
    (path,) = Path(dest).glob(f"maxtext-{MAXTEXT_VERSION}-*.whl")
    with zipfile.ZipFile(path) as zf:
        yield zf


def text(zf: zipfile.ZipFile, name: str) -> str:
    return zf.read(name).decode("utf-8")


@pytest.fixture(scope="module")
def base_yml(wheel) -> dict:
    return yaml.safe_load(text(wheel, "maxtext/configs/base.yml"))


@pytest.fixture(scope="module")
def types_py(wheel) -> str:
    return text(wheel, "maxtext/configs/types.py")


def fields(source: str) -> dict[str, tuple[str, ast.expr | None]]:
    """name -> (annotation as written, Field's default expression) for every annotated class attribute."""
    out = {}
    for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                default = None
                if isinstance(node.value, ast.Call) and node.value.args:
                    default = node.value.args[0]
                out.setdefault(node.target.id, (ast.unparse(node.annotation), default))
    return out


def literal(expr: ast.expr | None) -> object:
    if isinstance(expr, ast.Attribute):  # DatasetType.SYNTHETIC
        return expr.attr.lower()
    return ast.literal_eval(expr)


def every_key_elxpk_writes() -> set[str]:
    settings = {"checkpoint_dir": "gs://bkt/run/ckpt", "checkpoint_period": 100, "elastic_timeout_seconds": 300,
                "elastic_max_retries": 10, "elastic_min_slice_count": 2, "steps": 50}
    command = "python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml"
    keys = set()
    for pathways, elastic in ((True, True), (True, False), (False, False)):
        o = maxtext_overrides(settings, pathways=pathways, elastic=elastic, user_command=command)
        assert o.errors == ()
        keys |= set(o.keys)
    return keys


def test_vendored_defaults_and_types_are_base_yml(base_yml):
    kinds = {"bool": bool, "int": int, "str": str}
    for key in KEYS.values():
        assert key.name in base_yml, f"{key.name} is not in MaxText {MAXTEXT_VERSION}'s base.yml"
        assert base_yml[key.name] == key.default, key.name
        assert type(base_yml[key.name]) is kinds[key.kind], key.name


def test_vendored_types_are_types_py(types_py):
    declared = fields(types_py)
    for key in KEYS.values():
        assert key.name in declared, key.name
        annotation, default = declared[key.name]
        assert annotation == key.pydantic_type, key.name
        if key.name != "metrics_file":  # types.py: None, base.yml: "" (base.yml is what a run reads)
            assert literal(default) == key.default, key.name


def test_choices_are_maxtexts(types_py):
    enum = re.search(r"class DatasetType\(str, Enum\):(.*?)\n\n\n", types_py, re.S).group(1)
    assert tuple(re.findall(r'= "([a-z0-9_]+)"', enum)) == KEYS["dataset_type"].choices
    assert "if self.elastic_backup_kind not in (\"snapshot\", \"checkpoint\"):" in types_py
    assert KEYS["elastic_backup_kind"].choices == ("snapshot", "checkpoint")


def test_the_refusals_elxpk_reproduces_are_maxtexts(wheel, types_py):
    assert SINGLE_CONTROLLER_RULE in types_py
    assert "if self.elastic_enabled and not self.enable_single_controller:" in types_py
    assert ELASTIC_ITERATOR_PACKING_RULE in types_py
    for rule in ELASTIC_ITERATOR_RULES:
        assert rule in types_py, rule
    elastic = text(wheel, "maxtext/utils/elastic_utils.py")
    assert "minimum_slice_count=None if config.elastic_min_slice_count == -1" in elastic
    assert "max_retries=config.elastic_max_retries" in elastic and "timeout=config.elastic_timeout_seconds" in elastic
    assert "step % config.checkpoint_period" in text(wheel, "maxtext/common/checkpointing.py")
    paths = re.search(r"output_dir = os.path.join\(self.base_output_directory, self.run_name\)\n\s+"
                      r"self.checkpoint_dir = os.path.join\(output_dir, \"checkpoints\", \"\"\)", types_py)
    assert paths, "checkpoints are no longer base_output_directory/run_name/checkpoints"
    pyconfig = text(wheel, "maxtext/configs/pyconfig.py")
    assert 'if len(argv) >= 2 and argv[1].endswith(".yml"):' in pyconfig  # the config file, then key=value
    assert '_MAX_PREFIX = "M_"' in pyconfig


def test_every_key_elxpk_writes_is_in_base_yml(base_yml):
    written = every_key_elxpk_writes()
    assert written == {"elastic_enabled", "enable_single_controller", "enable_checkpointing", "base_output_directory",
                       "run_name", "checkpoint_period", "elastic_timeout_seconds", "elastic_max_retries",
                       "elastic_min_slice_count", "steps", "jax_cache_dir"}
    assert written <= set(base_yml) and written <= set(KEYS)


def test_model_configs_that_set_a_written_key(wheel):
    written = every_key_elxpk_writes()
    found: dict[str, dict[str, object]] = {}
    for name in wheel.namelist():
        match = re.fullmatch(r"maxtext/configs/models/(.+)\.yml", name)
        if match:
            cfg = yaml.safe_load(text(wheel, name)) or {}
            hits = {k: v for k, v in cfg.items() if k in written}
            if hits:
                found[match.group(1)] = hits
    assert found == MODEL_CONFIG_KEYS


def test_the_trainer_elxpk_recognises_is_the_elastic_one(wheel):
    train = text(wheel, "maxtext/trainers/pre_train/train.py")
    assert "elastic_utils.elastic_retry(" in train
    logger = text(wheel, "maxtext/common/metric_logger.py")
    assert 'metrics_dict["step"] = float(step)' in logger and 'metrics_dict["run_name"] = run_name' in logger
    assert '"learning/loss"' in logger and '"perf/step_time_seconds"' in logger


def test_every_key_of_the_demo_golden_command_is_in_base_yml(wheel, base_yml):
    """The rendered --trainer maxtext golden (tests/launcher/goldens): every key=value of its MaxText command,
    elxpk's and the user's, is a base.yml key, and its model config ships in the wheel."""
    golden = Path(__file__).resolve().parents[1] / "launcher" / "goldens" / "maxtext-qwen3-v5litepod-16x3.yaml"
    jobset = yaml.safe_load(golden.read_text(encoding="utf-8"))
    jobs = {job["name"]: job for job in jobset["spec"]["replicatedJobs"]}
    (box,) = jobs["pathways-head"]["template"]["spec"]["template"]["spec"]["containers"]
    (run,) = find_invocations(box["command"][-1])
    assert run.overrides and not set(run.overrides) - set(base_yml)
    model = run.value("model_name")
    assert f"maxtext/configs/models/{model}.yml" in wheel.namelist()
