"""Entry point of the ``elxpk`` console script: the command table (elxpk/cli/commands.py) and the one
top-level handler that turns every error into one line on stderr and an exit code.

Command modules keep heavy imports (jax, kubernetes, google.*) inside their function bodies:
``elxpk workload create --dry-run`` has a start-up budget.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable
from typing import Protocol


def _interrupted_at_start(signum: int, frame: object) -> None:
    """Ctrl-C before main() runs (its imports take a few hundred ms): one line and 130, as after it. Python's
    own handler raised KeyboardInterrupt in the middle of an import: a traceback, then exit 1 or death by
    SIGINT (measured for issue 51: 20 of 40 watchers interrupted in their first 0.4 s)."""
    os.write(2, b"interrupted\n")
    os._exit(130)


if os.path.basename(sys.argv[0] if sys.argv else "") == "elxpk" and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # the console script, not an importer
    signal.signal(signal.SIGINT, _interrupted_at_start)

# Start-up creates some 35,000 objects that live as long as the process (typer's, yaml's and elxpk's
# modules): at the default first threshold (700) the cyclic collector walks them ~50 times and finds
# nothing, ~3% of `workload create --dry-run`. A higher one keeps collection on, and what garbage waits for
# it bounded, for the long-running commands too; main(argv) puts the default back when it returns.
_GC_THRESHOLDS = gc.get_threshold()
gc.set_threshold(50_000, *_GC_THRESHOLDS[1:])

import typer  # noqa: E402 - after the threshold: its import is the largest part of start-up

from elxpk import yaml_reader_pattern  # noqa: E402
from elxpk.create.flags import FLAGS as CREATE_FLAGS  # noqa: E402
from elxpk.create.xpk_only import without_xpk_only  # noqa: E402
from elxpk.errors import ElxpkError, UsageError  # noqa: E402
from elxpk.flag_rows import free_text_flags  # noqa: E402
from elxpk.shown import shown  # noqa: E402
from elxpk_contract.exit_grace import leave_stuck_threads  # noqa: E402
from elxpk_contract.fd_limit import descriptors_error  # noqa: E402
from elxpk_contract.storage_full import storage_full_error  # noqa: E402

yaml_reader_pattern.seed()  # before any command imports yaml: a tenth of a dry-run, see the module

# kubectl's spelling, `--dry-run=client|server|none`. Typer options cannot take an optional value, so
# these exact tokens are rewritten to the flags that `workload create` declares.
_KUBECTL_DRY_RUN = {"--dry-run=client": ["--dry-run"], "--dry-run=server": ["--dry-run-server"],
                    "--dry-run=none": []}
# Options whose next token is a user value: never rewrite that value (the rows marked free_text).
_TAKES_VALUE = free_text_flags(CREATE_FLAGS)
DEBUG_ENV = "ELXPK_DEBUG"
# Commands whose argument is another command line: an option of that line read as the command's own is the
# line given without `--` before it.
_AFTER_DASHES = {"elxpk translate": "; put the xpk or gcluster command after `--`: elxpk translate -- xpk workload "
                                    "create ... (the shell's words, as you would run it)"}
CLOSED_PIPE = 141  # 128 + SIGPIPE: what a CLI killed by writing into a closed pipe exits with (git, cat)


def kubectl_dry_run(args: list[str]) -> list[str]:
    """`--dry-run=server` -> `--dry-run-server`, `--dry-run=client` -> `--dry-run`; anything else as is."""
    out: list[str] = []
    for index, token in enumerate(args):
        if token == "--":
            return out + args[index:]
        if token.startswith("--dry-run=") and not (index and args[index - 1] in _TAKES_VALUE):
            if token not in _KUBECTL_DRY_RUN:
                raise UsageError(f"{token}: use --dry-run (or --dry-run=client), --dry-run=server or --dry-run=none")
            out.extend(_KUBECTL_DRY_RUN[token])
        else:
            out.append(token)
    return out


def bare_trainer(args: list[str]) -> list[str]:
    """`--trainer` alone (followed by another option, or last) -> `--trainer=elxpk`, the bundled trainer.

    `workload create --trainer` takes a value (`elxpk` or `maxtext`), and Typer options cannot make it
    optional, so the bare spelling that scripts already use is rewritten here. The command has no positional
    arguments, so a token after `--trainer` that is not an option is its value.
    """
    out: list[str] = []
    for index, token in enumerate(args):
        if token == "--":
            return out + args[index:]
        following = args[index + 1] if index + 1 < len(args) else None
        if (token == "--trainer" and not (index and args[index - 1] in _TAKES_VALUE)
                and (following is None or following.startswith("-"))):
            out.append("--trainer=elxpk")
        else:
            out.append(token)
    return out


class StreamFailed(ElxpkError):
    """A write to stdout or stderr failed: `stream` names it (a failed stderr reports on stdout), `exit_code`
    is the failure's (74 when it ran out of space), and `quiet` when the reader closed the pipe (`status | head`,
    `| grep -q`): then, as other CLIs, no word and 141."""

    def __init__(self, message: str, *, stream: str, exit_code: int, quiet: bool = False) -> None:
        super().__init__(message)
        self.stream = stream
        self.exit_code = exit_code
        self.quiet = quiet


class _Stream:
    """A standard stream whose write errors (a full disk, a closed pipe) become one ElxpkError naming it:
    StorageFull (exit 74) when it ran out of space, as for any file elxpk writes.

    The first failure is kept, and raised again at every later write and at the final flush: click probes a
    stream with `write("")` and swallows what that raises, and a failure swallowed once must not turn the
    rest of the output into a silent exit 0 (`checkpoint inspect -o json > /dev/full` did)."""

    def __init__(self, stream, name: str) -> None:
        self._stream, self._name = stream, name
        self.error: StreamFailed | None = None

    def write(self, text: str) -> int:
        if self.error is not None and text:
            raise self.error
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        if self.error is not None:
            raise self.error
        try:
            self._stream.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: OSError) -> StreamFailed:
        if self.error is None:
            full = storage_full_error(exc, f"cannot write to {self._name}")
            message = str(full) if full is not None else f"cannot write to {self._name}: {exc.strerror or exc}"
            if isinstance(exc, BrokenPipeError):  # the reader is done: no word, and the closed pipe's code
                self.error = StreamFailed(message, stream=self._name, exit_code=CLOSED_PIPE, quiet=True)
            else:
                self.error = StreamFailed(message, stream=self._name,
                                          exit_code=full.exit_code if full is not None else ElxpkError.exit_code)
        return self.error

    def quiet_exit(self) -> None:
        """After a failure, point the descriptor at /dev/null: Python flushes the stream again at exit and
        would print its own traceback-like noise (real descriptors only; not under pytest)."""
        if self.error is None:
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class ClickProblem(Protocol):
    """What elxpk reads of a click exception, from whichever click this typer uses (its own copy or click):
    neither can be named here, so the types found at run time are typed by this."""

    exit_code: int

    def format_message(self) -> str: ...

    def show(self) -> None: ...


def _click_exception_types() -> tuple[tuple[type[ClickProblem], ...], tuple[type[ClickProblem], ...]]:
    """(usage errors, other click exceptions) of every click this typer may use: typer >= 0.28 vendors
    click as typer._click (without Abort or Exit, which typer itself defines); older typer uses click."""
    import importlib

    usage: list[type[ClickProblem]] = []
    other: list[type[ClickProblem]] = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        usage.append(module.UsageError)
        other.append(module.ClickException)
    return tuple(usage), tuple(other)


def _report(line: str, *, stderr_failed: bool = False) -> None:
    """One line on stderr; on stdout when stderr cannot take it (the exit code still says it failed). An
    error may quote the cluster (an API server's message): its controls are shown, never sent."""
    line = shown(line)
    streams = (sys.stdout,) if stderr_failed else (sys.stderr, sys.stdout)
    for stream in streams:
        try:
            if stream is not None:
                print(line, file=stream, flush=True)
                return
        except (OSError, ValueError, ElxpkError):
            continue


def run_guarded(action: Callable[[], object]) -> int:
    """Run `action` and map whatever it raises to an exit code, printing one line and never a traceback
    (unless ELXPK_DEBUG=1). Works with every typer/click the pins allow (typer 0.12 to 0.28)."""
    try:
        result = action()
    except ElxpkError as exc:
        failed_stream = exc.stream if isinstance(exc, StreamFailed) else None
        if isinstance(exc, StreamFailed) and exc.quiet:
            return exc.exit_code
        for line in str(exc).splitlines() or [type(exc).__name__]:
            _report(f"error: {line}", stderr_failed=failed_stream == "stderr")
        return exc.exit_code
    except typer.Exit as exc:  # click's Exit in typer < 0.28, typer's own since
        return int(getattr(exc, "exit_code", 0) or 0)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 1
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # click usage errors arrive here with standalone_mode=False
        limit = descriptors_error(exc, "elxpk")  # the host's limit, not a bug: its own line and 74; asked
        if limit is not None:  # first, before anything here imports a module (a file to open)
            _report(f"error: {limit}")
            return limit.exit_code
        usage, other = _click_exception_types()
        if isinstance(exc, usage) and type(exc).__name__ != "NoArgsIsHelpError":
            # click's usage errors (an unknown flag, a value of the wrong type) in elxpk's one-line form
            path = getattr(getattr(exc, "ctx", None), "command_path", None)
            where = _AFTER_DASHES.get(path or "") if type(exc).__name__ == "NoSuchOption" else None
            where = where or (f" (see {path} --help)" if path else "")
            message = exc.format_message()
            text = "; ".join(line.strip() for line in message.splitlines() if line.strip())
            _report(f"error: {text}{where}")
            return 2
        if isinstance(exc, usage + other):
            exc.show()
            return 2 if isinstance(exc, usage) else exc.exit_code
        if os.environ.get(DEBUG_ENV) == "1":
            import traceback

            traceback.print_exc()
        first = (str(exc).splitlines() or [""])[0]
        _report(f"error: internal error: {type(exc).__name__}: {first} (set {DEBUG_ENV}=1 for the traceback)")
        return 1
    # click returns the code of an Exit raised inside a command when standalone_mode is off
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; every error becomes one line on stderr and its exit code."""
    closed = [name for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)) if stream is None]
    if closed:  # Python sets a stream to None when its descriptor was closed at start (`>&-`)
        _report(f"error: cannot write to {closed[0]}: it is closed; elxpk prints its results and errors there")
        return 1
    if signal.getsignal(signal.SIGINT) is _interrupted_at_start:  # from here on run_guarded says it (130)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream(sys.stdout, "stdout"), _Stream(sys.stderr, "stderr")

    def invoke() -> object:
        from elxpk.cli.commands import build_app

        args, ignored = without_xpk_only(bare_trainer(kubectl_dry_run(list(argv if argv is not None else sys.argv[1:]))),
                                         _TAKES_VALUE)
        for line in ignored:  # a script written for xpk runs unchanged (README)
            print(f"warning: {line}", file=sys.stderr)
        result = build_app(args)(args=args, prog_name="elxpk", standalone_mode=False)
        sys.stdout.flush()  # a full or closed stdout is reported here, not by the interpreter at exit
        return result

    wrapped = sys.stdout, sys.stderr
    code = 1
    try:
        code = run_guarded(invoke)
        return code
    finally:
        for stream in wrapped:
            stream.quiet_exit()
        sys.stdout, sys.stderr = saved
        if argv is not None:  # an in-process caller (a test) gets its thresholds back; the console script
            gc.set_threshold(*_GC_THRESHOLDS)  # exits here, and a collection of it all would be wasted
        else:  # `local run` trains in this process: a failed save's orbax threads must not hold its exit
            leave_stuck_threads(code)


if __name__ == "__main__":
    sys.exit(main())
