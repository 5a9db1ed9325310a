"""`elxpk translate -- <xpk or gcluster command>`: the printed elxpk command renders what the original line
renders (given to `elxpk workload create`), for every gcluster spelling combination hypothesis draws and
for xpk's own golden commands (tests/launcher/xpk_gpu); a flag elxpk cannot carry is one line each, exit 2.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elxpk.cli.translate import translated
from elxpk.create import flags as table
from tests.launcher.gcluster_cases import CASES as GCLUSTER_CASES
from tests.launcher.gcluster_cases import FAILURES as GCLUSTER_FAILURES

IMAGE = "us-docker.pkg.dev/my-project/my-repo/trainer:1"
XPK_GOLDENS = Path(__file__).with_name("xpk_gpu")


def render(cli, *argv: str, path: tuple[str, str] = ("workload", "create")) -> dict:
    done = cli(*path, *[a for a in argv if a != "--dry-run"], "--dry-run")
    assert done.code == 0, (argv, done.err)
    return yaml.safe_load(done.out)


@st.composite
def gcluster_lines(draw) -> list[str]:
    """A `gcluster job submit` line in gcluster's spellings that gcluster (and elxpk) accepts."""
    slices = draw(st.integers(1, 3))
    pathways = draw(st.booleans())
    machines = [["--compute-type", "v6e-16"], ["--compute-type", "ct6e-standard-4t", "--topology", "4x4"],
                ["--compute-type", "v5p-8"]] + ([] if pathways or slices > 1 else [["--compute-type", "h100-mega-80gb-8"]])
    line = ["--name", draw(st.sampled_from(["run-1", "elastic-a"])), *draw(st.sampled_from(machines)),
            "--num-slices", str(slices), "-i", IMAGE, "-e", draw(st.sampled_from(["python3 train.py", "bash run.sh"]))]
    optional = {
        "--restarts": st.integers(0, 5).map(str), "--grace-period": st.sampled_from(["30s", "2m", "45"]),
        "--gke-ttl-after-finished": st.sampled_from(["5m", "1h", "2h"]),
        "--gke-namespace": st.sampled_from(["default", "team-a"]),
        "--priority": st.sampled_from(["low", "high"]), "--env": st.sampled_from(["A=1", "B=two words"]),
    }
    if pathways:
        line += ["--pathways", "--pathways-gcs-location", "gs://my-bucket/tmp"]
        optional |= {"--pathways-elastic-slices": st.integers(0, slices - 1).map(str),
                     "--pathways-max-slice-restarts": st.integers(0, 10).map(str),
                     "--pathways-proxy-server-image": st.just("gcr.io/p/proxy:1"),
                     "--pathways-server-image": st.just("gcr.io/p/server:1"),
                     "--pathways-worker-image": st.just("gcr.io/p/worker:1"),
                     "--pathways-proxy-args": st.just("--a=1 --b=2"), "--pathways-server-args": st.just("--c=3"),
                     "--pathways-worker-args": st.just("--d=4"), "--pathways-proxy-env": st.just("P=1"),
                     "--pathways-server-env": st.just("S=2"), "--pathways-worker-env": st.just("W=x y")}
    chosen = {flag: draw(optional[flag]) for flag in draw(st.lists(st.sampled_from(sorted(optional)), unique=True,
                                                                     max_size=6))}
    if chosen.get("--pathways-elastic-slices", "0") != "0" and chosen.get("--pathways-max-slice-restarts") == "0":
        del chosen["--pathways-max-slice-restarts"]  # elxpk refuses an elastic run that never restarts a slice
    for flag, value in chosen.items():
        line += [flag, value]
    if pathways and draw(st.booleans()):
        line.append("--pathways-headless")
    return line


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=gcluster_lines())
def test_translate_renders_what_the_gcluster_line_renders(line, cli):
    (words,) = translated(["gcluster", "job", "submit", *line])
    assert words[:3] == ["elxpk", "workload", "create"]
    spelled = {a.spelling for row in table.FLAGS for a in row.aliases} | {r.flag for r in table.FLAGS if r.dialect}
    assert not spelled & set(words), words  # elxpk's own spellings only: no gcluster default left implicit
    assert render(cli, *words[3:]) == render(cli, *line, path=("job", "submit"))


@pytest.mark.parametrize("name", sorted(GCLUSTER_CASES))
def test_gclusters_golden_commands_run_unchanged_and_translate(name, cli):
    """Each vendored gcluster command (tests/launcher/gcluster_cases.py, whose renders gcluster made), given to
    `elxpk workload create` as written, renders what its xpk-spelled equivalent renders; translated, too."""
    case = GCLUSTER_CASES[name]
    expected = render(cli, *case.elxpk)
    assert render(cli, *case.gcluster) == expected
    (words,) = translated(["gcluster", "job", "submit", *case.gcluster])
    assert render(cli, *words[3:]) == expected


def test_gclusters_1369_command_translates_to_an_admissible_render(cli):
    (line,) = GCLUSTER_FAILURES.values()
    (words,) = translated(["gcluster", "job", "submit", *line])
    worker = render(cli, *words[3:])["spec"]["replicatedJobs"][1]["template"]["spec"]
    assert worker["template"]["spec"]["restartPolicy"] == "OnFailure" and "podFailurePolicy" not in worker


def _xpk_golden_commands() -> list[list[str]]:
    commands = []
    for path in sorted(XPK_GOLDENS.glob("*.yaml")):
        header = path.read_text(encoding="utf-8").splitlines()[0]  # "# xpk 1.16.0: workload create ... (networks: ...)"
        command = header.split(": ", 1)[1].rsplit(" (networks:", 1)[0]
        commands.append(["xpk", *shlex.split(command.replace("--command python3 train.py", "--command 'python3 train.py'"))])
    return commands


def test_translate_round_trips_xpks_golden_commands(cli):
    commands = _xpk_golden_commands()
    assert len(commands) == 4
    for command in commands:
        (words,) = translated(command)
        assert "--no-pathways" in words  # xpk's `workload create` is a plain JobSet
        assert render(cli, *words[3:]) == render(cli, *command[3:]), command


def test_xpk_create_pathways_stays_pathways(cli):
    line = ["--workload", "p-1", "--tpu-type", "v5p-8", "--docker-image", IMAGE, "--command", "python3 t.py",
            "--max-restarts", "2"]
    (words,) = translated(["xpk", "workload", "create-pathways", *line])
    assert "--no-pathways" not in words
    assert render(cli, *words[3:]) == render(cli, *line)


def test_flags_it_cannot_carry_are_one_line_each_and_exit_2(cli):
    done = cli("translate", "--", "gcluster", "job", "submit", "--name", "r", "--compute-type", "v6e-16", "-i", IMAGE,
               "-e", "x", "--mount", "gs://b:/data", "--gke-nap-provisioning=spot", "--verbose", "--base-image", "py")
    assert done.code == 2 and done.out == ""
    assert [line.split(":")[1].strip() for line in done.error_lines] == \
        ["--mount", "--gke-nap-provisioning", "--verbose", "--base-image"]
    done = cli("translate", "--", "kubectl", "apply", "-f", "x.yaml")
    assert done.code == 2 and "not an xpk or gcluster command" in done.err
    # a gcluster rule broken: refused as `workload create` would refuse it
    done = cli("translate", "--", "gcluster", "job", "submit", "--name", "r" * 29, "--compute-type", "v6e-16", "-e", "x")
    assert done.code == 2 and "gcluster's limit is 28" in done.err


def test_translate_prints_a_wait_for_await_job_completion(cli):
    done = cli("translate", "--", "gcluster", "job", "submit", "-n", "r-1", "--compute-type", "v6e-16", "-i", IMAGE,
               "-e", "x", "--await-job-completion", "--timeout", "2h")
    assert done.code == 0, done.err
    assert done.out.strip().endswith("&& elxpk workload wait r-1 --for completed --timeout 2h")


def test_translate_as_a_user_runs_it():
    """The console script: the printed line, run by the shell, renders the gcluster line's manifest."""
    elxpk = str(Path(sys.executable).with_name("elxpk"))
    line = ["--name", "run-1", "--compute-type", "v6e-16", "--num-slices", "2", "-i", IMAGE, "-e", "python3 t.py",
            "--pathways", "--pathways-gcs-location", "gs://bkt/tmp", "--pathways-elastic-slices=1"]
    done = subprocess.run([elxpk, "translate", "--", "gcluster", "job", "submit", *line], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    ours = subprocess.run([elxpk, *words[1:], "--dry-run"], capture_output=True, text=True, timeout=120)
    theirs = subprocess.run([elxpk, "job", "submit", *line, "--dry-run"], capture_output=True, text=True, timeout=120)
    assert ours.returncode == theirs.returncode == 0, (ours.stderr, theirs.stderr)
    assert ours.stdout == theirs.stdout and "kind: JobSet" in ours.stdout


XPK_BASE = ["--workload", "w1", "--tpu-type", "v5p-8", "--docker-image", IMAGE]


@pytest.mark.parametrize("extra", [
    ["--command", "true", "--num-slices", "abc"], ["--command", "true", "--restarts", "-1"],
    ["--command", "true", "--spot", "--flex-start"], ["--command", "true", "--max-run-duration", "1h"],
    ["--command", "true", "--num-slices", "0", "--priority", "urgent"], ["--command", "true", "--steps"],
    ["--command", "true", "--num-slices", "2", "--num-slices", "4"],  # click kept the last, silently
])
def test_translate_refuses_with_workload_creates_lines_what_it_would_refuse(cli, extra):
    """The line as `xpk workload create` takes it is refused by translate with the very lines `elxpk workload
    create` gives the same flags: nothing printed that the printed command would refuse."""
    created = cli("workload", "create", "--dry-run", *XPK_BASE, *extra)
    done = cli("translate", "--", "xpk", "workload", "create", *XPK_BASE, *extra)
    assert created.code == 2 and done.code == 2 and done.out == "", done.out
    assert done.err == created.err and done.err.startswith("error: "), (done.err, created.err)


@given(st.text(alphabet=st.characters(codec="ascii", exclude_categories=("Cc",)), min_size=1, max_size=8))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_translate_and_create_agree_on_any_num_slices_text(cli, text):
    created = cli("workload", "create", "--dry-run", *XPK_BASE, "--command", "true", f"--num-slices={text}")
    done = cli("translate", "--", "xpk", "workload", "create", *XPK_BASE, "--command", "true", f"--num-slices={text}")
    assert done.code == created.code and (done.code == 0 or done.err == created.err), (done.err, created.err)


def test_an_unquoted_command_of_two_words_is_refused_not_cut(cli):
    """`--command python3 train.py` as the shell split it: train.py was dropped silently."""
    done = cli("translate", "--", "xpk", "workload", "create", *XPK_BASE, "--command", "python3", "train.py")
    assert done.code == 2 and done.out == "" and done.err == (
        "error: Got unexpected extra argument (train.py): no flag takes it; quote a value of several words as one, "
        "e.g. --command 'python3 train.py'\n")


@pytest.mark.parametrize(("line", "expected"), [
    (["--name", "r", "-e", "true"],
     "error: --compute-type: required; e.g. --compute-type v6e-16, or a GPU machine such as h100-mega-80gb-8\n"),
    (["--compute-type", "v6e-16", "-e", "true"], "error: --name: required; name the workload, e.g. --name my-run-1\n"),
    (["--name", "r", "-e", "true", "--compute-type", "v6e-16", "--gke-namespace", "Bad_ns"],
     "error: --gke-namespace 'Bad_ns' is not a valid namespace name: use lowercase letters, digits and '-', at "
     "most 63 characters\n"),
])
def test_a_gcluster_line_is_told_its_own_flags(cli, line, expected):
    """A required row missing from a gcluster line, or its --gke-namespace, named in gcluster's spelling (they
    named --tpu-type, --workload, --namespace: flags the user never typed), by translate and job submit alike;
    and translate takes the line without `--` too (click named its first flag an unknown option of translate)."""
    for argv in (("translate", "--", "gcluster", "job", "submit", *line), ("translate", "gcluster", "job", "submit", *line),
                 ("job", "submit", "--dry-run-out=/dev/null", *line)):
        done = cli(*argv)
        assert (done.code, done.err) == (2, expected), argv


@pytest.mark.parametrize("flag", ["--reservation", "--workload", "--docker-image", "--command"])
@pytest.mark.parametrize("blank", ["", "  "])
def test_an_empty_value_in_the_line_is_named_by_its_flag_as_create_names_it(cli, flag, blank):
    """Issue 51: translate said `COMMAND...: empty` for `--reservation ''`, naming its own argument, not the flag."""
    line = [*XPK_BASE, "--command", "true"]
    line = [*line[:line.index(flag) + 1], blank, *line[line.index(flag) + 2:]] if flag in line else [*line, flag, blank]
    created = cli("workload", "create", "--dry-run", *line)
    done = cli("translate", "--", "xpk", "workload", "create", *line)
    assert done.code == 2 and done.out == "" and done.err == created.err, (done.err, created.err)
    assert done.err.startswith(f"error: {flag} {blank!r}: empty (or only spaces)"), done.err


def test_a_second_double_dash_inside_the_line_is_said_as_such(cli):
    done = cli("translate", "--", "xpk", "workload", "create", *XPK_BASE, "--command", "true", "--")
    assert done.code == 2 and done.out == "" and done.err == (
        "error: --: a second `--` in the xpk command line; it takes none (everything after translate's first `--` "
        "is the command); drop it\n")
