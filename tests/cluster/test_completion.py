"""Shell completion, driven as a shell drives it: the script `elxpk` prints for bash is sourced in a real
`bash`, COMP_WORDS/COMP_CWORD set, the completion function called and COMPREPLY read. Workload names come
from the fake API server's JobSets; an unreachable cluster gives nothing, within the lookup's bound."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from elxpk import catalog
from elxpk.catalog import GPU_TYPES
from elxpk.cli import completion
from elxpk.cli.options import ClusterSelection
from elxpk.notify.flags import FORMATS
from tests.cluster.conftest import pathways_jobset

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def complete(*words: str, shell_script: str, lookup_s: float | None = None) -> tuple[list[str], str]:
    """COMPREPLY for `words` (the last one being completed) in a real bash that sourced `shell_script`,
    and bash's stderr; `lookup_s` the bound of the cluster lookup (default: elxpk's own)."""
    program = (f"{shell_script}\nCOMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
               f"COMP_CWORD={len(words) - 1}\n_elxpk_completion elxpk\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    env = _env() if lookup_s is None else {**_env(), completion.LOOKUP_ENV: str(lookup_s)}
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line], done.stderr


@pytest.fixture(scope="module")
def bash_script() -> str:
    """What `elxpk --show-completion` prints when run from bash (Typer detects the shell)."""
    # `; :` keeps bash elxpk's parent, as the user's interactive shell is: `bash -c CMD` execs a lone command,
    # and Typer's shell detection (shellingham) then finds pytest's ancestors, no shell at all in a CI lane.
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", "elxpk --show-completion; :"], env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "complete -o default -F _elxpk_completion elxpk" in done.stdout, done.stderr
    return done.stdout


def test_show_completion_for_each_shell():
    """bash, zsh and fish: the script of each, by name (`_ELXPK_COMPLETE=source_SHELL`, what Typer's
    `--show-completion` prints for the shell it runs in)."""
    for shell, mark in (("bash", "complete -o default -F"), ("zsh", "compdef _elxpk_completion elxpk"),
                        ("fish", "complete --command elxpk")):
        done = subprocess.run([str(BIN / "elxpk")], env={**_env(), "_ELXPK_COMPLETE": f"source_{shell}"},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and mark in done.stdout, (shell, done.stderr)


def test_commands_catalog_values_and_row_choices(bash_script):
    assert complete("elxpk", "workload", "st", shell_script=bash_script)[0] == ["status"]
    tpus, err = complete("elxpk", "workload", "create", "--tpu-type", "v5litepod-", shell_script=bash_script)
    assert tpus == [n for n in catalog.all_names() if n.startswith("v5litepod-")] and len(tpus) > 3 and err == ""
    gpus = complete("elxpk", "workload", "create", "--device-type", "", shell_script=bash_script)[0]
    assert set(gpus) == {g.name for g in GPU_TYPES} | {g.machine_type for g in GPU_TYPES}
    assert complete("elxpk", "workload", "events", "x", "--notify-format", "", shell_script=bash_script)[0] == list(FORMATS)
    assert complete("elxpk", "workload", "create", "--trainer", "m", shell_script=bash_script)[0] == ["maxtext"]
    assert complete("elxpk", "workload", "status", "x", "-o", "y", shell_script=bash_script)[0] == ["yaml"]


def test_workload_names_from_the_cluster(fake, kubeconfig, bash_script):
    """(Under the load of a shared test machine the import of the Kubernetes client alone can take 2 s, so
    the lookup is given a minute here; the unreachable case below keeps the 2 s bound.)"""
    for name in ("train-a", "train-b", "other"):
        fake.store.create(("jobset.x-k8s.io", "jobsets"), {**pathways_jobset(name), "metadata": {
            **pathways_jobset(name)["metadata"], "namespace": "default"}})
    names, err = complete("elxpk", "workload", "status", "--kubeconfig", str(kubeconfig), "tr",
                          shell_script=bash_script, lookup_s=60)
    assert names == ["train-a", "train-b"] and err == ""
    assert complete("elxpk", "workload", "events", "--kubeconfig", str(kubeconfig), "", shell_script=bash_script,
                    lookup_s=60)[0] == [
        "other", "train-a", "train-b"]


def test_an_unreachable_cluster_completes_nothing_silently_within_the_bound(tmp_path, bash_script, monkeypatch):
    """A server that accepts the connection and never answers: no names, nothing on stderr, and the Tab
    returns (the bound is LOOKUP_S; the limit asserted here is generous, to catch a hang)."""
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # the lookup silences stderr; put it back after
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    config = tmp_path / "kubeconfig.yaml"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{silent.getsockname()[1]}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n")
    try:
        names, err = complete("elxpk", "workload", "status", "--kubeconfig", str(config), "",
                              shell_script=bash_script)
        assert names == [] and err == ""
        start = time.monotonic()
        target = ClusterSelection(kubeconfig=str(config)).resolve
        assert completion.workload_names(target, "") == []
        assert time.monotonic() - start < completion.LOOKUP_S + 5
    finally:
        silent.close()


def test_the_readme_completion_examples_run_as_written(tmp_path):
    """Each line of the README's block, in bash, with HOME a fresh folder: the script lands where it says."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- completion-examples:begin -->", 1)[1].split("<!-- completion-examples:end -->", 1)[0]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.startswith("elxpk") or
             line.startswith("_ELXPK")]
    assert len(lines) == 3
    env = {**_env(), "HOME": str(tmp_path), "SHELL": "/bin/bash"}
    for line in lines:
        done = subprocess.run(["bash", "--norc", "--noprofile", "-c", line + "; :"], env=env, capture_output=True,
                              text=True, timeout=60)  # `; :`: bash stays the parent (see bash_script)
        assert done.returncode == 0, (line, done.stderr)
    assert "_elxpk_completion" in (tmp_path / ".bash_completions" / "elxpk.sh").read_text()
    assert "source" in (tmp_path / ".bashrc").read_text()
    assert "compdef _elxpk_completion elxpk" in (tmp_path / "_elxpk.zsh").read_text()


def test_completion_keeps_cluster_clients_off_the_start_up_path():
    """`elxpk --version` and `workload create --dry-run` build the options that name the completers: they
    still import no jax, kubernetes or google module."""
    code = ("import sys, contextlib, io; from elxpk.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['--version']) == 0\n"
            "    assert main('workload create --workload w1 --tpu-type v5p-8 --docker-image r.io/p/i:1 --command true "
            "--dry-run'.split()) == 0\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'kubernetes', 'google'}))")
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


HOSTILE_NAMES = ("x$(touch PWNED)", "q`touch PWNED`", "*", "y\nz", "Upper-Case", "good-1")


# How each shell is started interactively, and its first line: the completion script loaded (zsh's needs
# compinit), then a file touched to say the line editor is reading.
SHELLS = {
    "bash": (["bash", "--norc", "--noprofile", "-i"], "bind 'set bell-style none'; PS1='$ '; source {script}"),
    "zsh": (["zsh", "-f", "-i"], "autoload -Uz compinit; compinit -u; PS1='$ '; source {script}"),
    "fish": (["fish", "--no-config", "-i"], "function fish_prompt; echo '$ '; end; source {script}"),
}


def _interactive(shell: str, script: Path, cwd: Path, lines: list[bytes], env: dict[str, str]) -> list[str]:
    """Each of `lines` typed into a real interactive `shell` on a pseudo-terminal, line editing on: the text,
    Tab, then Ctrl-A `echo ` and Ctrl-E `>> OUT`, Enter. OUT's lines are what Tab made of each line. The
    editor takes the keys in order: a Tab's completion (an `elxpk` process asking the API server) ends before
    the keys after it are read, as when a user types them."""
    import pty

    argv, setup = SHELLS[shell]
    out, ready = cwd.parent / f"{shell}.out", cwd.parent / f"{shell}.ready"
    main, child = pty.openpty()
    process = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, cwd=cwd, start_new_session=True,
                               preexec_fn=_controlling_terminal,
                               env={**env, "TERM": "xterm", "HISTFILE": "/dev/null", "HOME": str(cwd.parent)})
    os.close(child)
    drain = threading.Thread(target=_drain, args=(main,), daemon=True)  # a full pty would stop the shell
    drain.start()

    def wait_for(done: Callable[[], bool]) -> None:
        end = time.monotonic() + 90
        while not done() and time.monotonic() < end:
            time.sleep(0.1)

    try:
        os.write(main, setup.format(script=shlex.quote(str(script))).encode() + f"; touch {ready}\r".encode())
        wait_for(ready.exists)
        os.write(main, b"".join(line + b"\t\x01echo \x05 >> " + str(out).encode() + b"\r" for line in lines))
        wait_for(lambda: out.exists() and len(out.read_text().splitlines()) >= len(lines))
    finally:
        process.kill()
        process.wait()
        os.close(main)
    return [line.strip() for line in out.read_text().splitlines()] if out.exists() else []


def _controlling_terminal() -> None:
    """In the child, after setsid: the pty becomes its terminal (fish will not run interactively without one)."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


@pytest.mark.parametrize("shell", list(SHELLS))
def test_a_hostile_servers_names_never_reach_an_interactive_shell(fake, kubeconfig, tmp_path, shell):
    """A spoofed API server serves names the real API refuses. In a real interactive shell, Tab then Enter:
    `x$(touch PWNED)` would have been inserted unquoted and run, `*` expanded into the directory's files, a
    newline split into two; only a name the API could hold is offered (`good-1`, completed as a user sees)."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    for name in HOSTILE_NAMES:
        fake.store.put(("jobset.x-k8s.io", "jobsets"), {**pathways_jobset(name), "metadata": {
            **pathways_jobset(name)["metadata"], "name": name, "namespace": "default"}})
    done = subprocess.run([str(BIN / "elxpk")], env={**_env(), "_ELXPK_COMPLETE": f"source_{shell}"},
                          capture_output=True, text=True, timeout=60)
    script = tmp_path / f"complete.{shell}"
    script.write_text(done.stdout)
    work = tmp_path / "work"
    work.mkdir()
    (work / "a-file").write_text("")
    line = f"elxpk workload status --kubeconfig {kubeconfig} "
    echoed = _interactive(shell, script, work, [(line + start).encode() for start in ("x", "g", "")],
                          {**_env(), completion.LOOKUP_ENV: "60"})
    assert not (work / "PWNED").exists(), echoed
    assert echoed == [(line + word).strip() for word in ("x", "good-1", "good-1")], echoed


def test_every_candidate_is_a_word_every_shell_takes_as_it_is():
    """Catalog values, flag choices and workload names pass `offered`: no glob, quote, expansion or separator."""
    from hypothesis import given
    from hypothesis import strategies as st

    @given(st.lists(st.text(max_size=12), max_size=6))
    def check(candidates):
        for word in completion.offered(candidates):
            assert shlex.quote(word) == word and word[0].isalnum()

    check()
    assert completion.offered(list(HOSTILE_NAMES)) == ["Upper-Case", "good-1"]


@pytest.mark.parametrize("value", ["inf", "nan", "1e309", "-inf", "1e9"])
def test_a_timeout_that_is_no_number_of_seconds_falls_back_to_the_default(monkeypatch, value):
    monkeypatch.setenv(completion.LOOKUP_ENV, value)
    assert completion.lookup_s() == completion.LOOKUP_S
