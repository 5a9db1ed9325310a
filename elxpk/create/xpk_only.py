"""xpk's `workload create`/`create-pathways` flags that elxpk does not carry: a warning each, not a refusal.

The README promises that a script written for xpk runs unchanged. These flags change nothing elxpk renders
(debug logging, Vertex TensorBoard, xpk's own image build, its validation and prompts) or ask for what
elxpk does not render (MTC, storage mounts, a sidecar): the line is taken without them, and one warning per
flag says what was left out. The list is xpk's parser (AI-Hypercomputer/xpk at 367c838: its workload
parser and common arguments); a flag elxpk has a row for is never here (tests/launcher/test_xpk_only.py).
"""

from __future__ import annotations

# flag -> (takes a value, what xpk does with it)
XPK_ONLY: dict[str, tuple[bool, str]] = {
    "--enable-debug-logs": (False, "xpk prefixes the command with TPU debug log levels"),
    "--use-vertex-tensorboard": (False, "Vertex AI TensorBoard"),
    "--experiment-name": (True, "the Vertex AI experiment"),
    "--base-docker-image": (True, "xpk builds an image from it and --script-dir; give --docker-image"),
    "--script-dir": (True, "xpk builds an image from it; give --docker-image"),
    "--docker-image-pull-secret": (True, "imagePullSecrets of the pods"),
    "--colocated-python-sidecar-image": (True, "a colocated Python sidecar on the workers"),
    "--storage": (True, "xpk's Storage mounts"),
    "--use-parallel-containers": (False, "one container per chip; Pathways uses one"),
    "--no-use-parallel-containers": (False, "one container per VM, as elxpk renders"),
    "--scheduler": (True, "the pods' scheduler"),
    "--ramdisk-directory": (True, "a RAM disk for multi-tier checkpointing"),
    "--mtc-enabled": (False, "multi-tier checkpointing"),
    "--debug-dump-gcs": (True, "XLA dumps to gs://"),
    "--deploy-stacktrace-sidecar": (False, "a stack-trace sidecar"),
    "--use-pathways": (False, "deprecated in xpk; use workload create or --no-pathways"),
    "--skip-validation": (False, "xpk's check of its own binaries"),
    "--quiet": (False, "xpk's prompts; elxpk asks none when creating"),
}
_COMMANDS = (("workload", "create"), ("workload", "create-pathways"))


def without_xpk_only(args: list[str], takes_value: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """`args` of `workload create` less xpk's flags elxpk does not carry (each with its value), and one
    warning per flag left out. Other commands, what follows `--`, and the values of `takes_value` options
    (--command's text) are left as they are."""
    if tuple(args[:2]) not in _COMMANDS:
        return args, []
    out: list[str] = []
    warnings: list[str] = []
    index = 0
    while index < len(args):
        token = args[index]
        if token == "--":
            return out + args[index:], warnings
        name = token.split("=", 1)[0]
        if name in XPK_ONLY and not (index and args[index - 1] in takes_value):
            has_value, what = XPK_ONLY[name]
            warnings.append(f"{name}: xpk's flag, not carried by elxpk ({what}); ignored")
            index += 2 if has_value and "=" not in token and index + 1 < len(args) else 1
            continue
        out.append(token)
        index += 1
    return out, warnings
