"""Entry point of the ``elxpk`` console script.

Command modules are imported here, so each must keep heavy imports (jax, kubernetes, google.*)
inside its function bodies: ``elxpk workload create --dry-run`` has a start-up budget.
"""

from __future__ import annotations

import importlib
import sys

import typer

from elxpk.errors import ElxpkError, UsageError

app = typer.Typer(
    name="elxpk",
    help="Launch and follow elastic multi-slice JAX training on GKE, or run the whole loop locally.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register(argv: list[str] | None = None) -> None:
    # Each group registers itself on `app`; a missing module (work in progress) must not break the rest.
    # The registry registers each module once per process (main() is called repeatedly in tests), and
    # for `elxpk <group> ...` only that group: building every other command costs ~40 ms of start-up.
    from elxpk.cli import registry

    registry.register_all(app, only=argv[0] if argv else None, words=argv[1:] if argv else ())


# kubectl's spelling, `--dry-run=client|server|none`. Typer options cannot take an optional value, so
# these exact tokens are rewritten to the flags that `workload create` declares.
_KUBECTL_DRY_RUN = {"--dry-run=client": ["--dry-run"], "--dry-run=server": ["--dry-run-server"],
                    "--dry-run=none": []}
# Options whose next token is a user value: never rewrite that value.
_TAKES_VALUE = ("--command", "--env", "--custom-pathways-proxy-server-args", "--custom-pathways-server-args",
                "--custom-pathways-worker-args")


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


def _click_exceptions() -> list:
    """Click's exception modules: typer >= 0.28 vendors click as typer._click; older typer uses click."""
    modules = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            continue
    return modules


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; expected errors become one line on stderr and their exit code."""
    try:
        args = kubectl_dry_run(list(argv if argv is not None else sys.argv[1:]))
        _register(args)
        app(args=args, standalone_mode=False)
    except ElxpkError as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(f"error: {line}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # typer.Exit inside standalone_mode=False
        return int(exc.code or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # click usage errors arrive here with standalone_mode=False
        for exceptions in _click_exceptions():
            if isinstance(exc, exceptions.UsageError):
                exc.show()
                return 2
            if isinstance(exc, exceptions.Abort):
                print("aborted", file=sys.stderr)
                return 1
            if isinstance(exc, exceptions.Exit):
                return exc.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
