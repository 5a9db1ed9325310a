"""Entry point of the ``elxpk`` console script.

Command modules are imported here, so each must keep heavy imports (jax, kubernetes, google.*)
inside its function bodies: ``elxpk workload create --dry-run`` has a start-up budget.
"""

from __future__ import annotations

import sys

import typer

from elxpk.errors import ElxpkError

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

    registry.register_all(app, only=argv[0] if argv else None)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; expected errors become one line on stderr and their exit code."""
    args = argv if argv is not None else sys.argv[1:]
    _register(args)
    try:
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
        import click

        if isinstance(exc, click.exceptions.UsageError):
            exc.show()
            return 2
        if isinstance(exc, click.exceptions.Abort):
            print("aborted", file=sys.stderr)
            return 1
        if isinstance(exc, click.exceptions.Exit):
            return exc.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
