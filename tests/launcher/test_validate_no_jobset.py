"""`workload validate` of a file that holds no JobSet (empty, only comments, only `---`, only other kinds, an
empty List) is exit 2 naming the file, never `OK`: a failed render leaves an empty jobset.yaml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.cli.main import main
from tests.launcher.conftest import GOLDENS

OTHER = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
         {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
         {"apiVersion": "v1", "kind": "List", "items": []},
         {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}]
NOISE = st.sampled_from(["", "\n", "# a comment\n", "---\n", "--- # c\n", "   \n"])


@st.composite
def no_jobset_text(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        parts.append(draw(NOISE))
        if draw(st.booleans()):
            parts.append("---\n" + yaml.safe_dump(draw(st.sampled_from(OTHER))))
    return "".join(parts)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=no_jobset_text())
def test_a_file_without_a_jobset_is_exit_2_naming_it(tmp_path_factory, capsys, text: str) -> None:
    path = tmp_path_factory.mktemp("v") / "jobset.yaml"
    path.write_text(text)
    capsys.readouterr()
    code = main(["workload", "validate", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "OK" not in err, (text, out, err)
    assert err.count("\n") == 1 and f"{path}: no JobSet (or PathwaysJob) in it" in err, err


def test_each_file_without_a_jobset_is_named_and_a_jobset_beside_it_still_passes(tmp_path, capsys) -> None:
    empty, comments = tmp_path / "empty.yaml", tmp_path / "comments.yaml"
    empty.write_text("")
    comments.write_text("# nothing\n---\n---\n")
    golden = str(next(iter(sorted(GOLDENS.glob("*.yaml")))))
    capsys.readouterr()
    assert main(["workload", "validate", golden, str(empty), str(comments)]) == 2
    err = capsys.readouterr().err
    assert f"{empty}: no JobSet" in err and f"{comments}: no JobSet" in err and golden not in err
    assert main(["workload", "validate", golden]) == 0  # a JobSet alone still passes


def test_validate_of_an_empty_file_as_the_user_runs_it(tmp_path) -> None:
    path = tmp_path / "jobset.yaml"
    path.write_text("")
    script = str(Path(sys.executable).parent / "elxpk")  # the console script, as the README runs it
    done = subprocess.run([script, "workload", "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.strip().splitlines() == [f"error: {path}: no JobSet (or PathwaysJob) in it (no object: "
                                                "empty, only comments and ---, or an empty List); give the JobSet "
                                                "manifest, e.g. what `elxpk workload create ... --dry-run > "
                                                "jobset.yaml` writes when it succeeds"], done.stderr
