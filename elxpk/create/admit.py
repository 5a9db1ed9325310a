"""The last stage of `workload create` before anything is printed, written or sent: what the cluster would
refuse of the rendered manifest (elxpk/create/pipeline.py).

Two kinds, told apart by whose fault they are:
- a violation of JobSet's admission rules or the API server's (elxpk/admission): the spec was validated, so
  the render is at fault; an internal error (exit 1) naming the first few violations;
- an object over the API server's size limit (elxpk/admission/object_size.py): the user's values are too
  large; exit 2, naming the largest --env value.
"""

from __future__ import annotations

from elxpk.admission import require_admissible
from elxpk.admission.object_size import largest_env, size_problem
from elxpk.create.manifest import Manifest
from elxpk.errors import UsageError


def admit(manifest: Manifest) -> Manifest:
    """`manifest` as rendered, when the cluster would admit it; else ElxpkError or UsageError (see above)."""
    require_admissible(manifest.objects)  # a validated spec must render what the cluster admits
    for obj in manifest.objects:
        problem = size_problem(obj)
        if problem:
            env = largest_env(obj)
            culprit = f"; the largest --env value is {env[0]} ({env[1] // 1024} KiB)" if env else ""
            raise UsageError(f"the rendered {obj.get('kind', 'object')} {problem}: shorten the --env values or "
                             f"--command, or pass large data through a file or bucket{culprit}")
    return manifest
