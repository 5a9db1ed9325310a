"""The JobSet CRD's schema, made strict, shared by the manifest checks and the fake API server.

The CRDs are vendored in the package (elxpk/crds/, upstream commits in its README) and the strict
schema comes from the product's own loader, so the tests check exactly what `elxpk workload validate`
checks. "Strict": every object schema that lists properties and does not preserve unknown fields gets
`additionalProperties: false`, as the API server's strict field validation would refuse them.
"""

from __future__ import annotations

from elxpk.admission.schema import crds_dir, strict_crd_schema, strictify

__all__ = ["crds_dir", "strict_crd_schema", "strictify"]
