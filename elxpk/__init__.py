"""elxpk: an xpk-style launcher for elastic multi-slice JAX training on GKE.

Importing this package must stay cheap: rendering a manifest never imports jax, kubernetes or the
Google clients. Heavy modules are imported inside the functions that need them.
"""

__version__ = "0.1.0"
