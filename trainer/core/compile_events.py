"""Whether a compile was served by jax's persistent compilation cache: jax reports each hit as a monitoring
event ('/jax/compilation_cache/cache_hits', jax/_src/compiler.py), and nothing else says so. One listener per
process counts them; a compile that saw the count rise was a cache hit."""

from __future__ import annotations

import threading

_HIT = "/jax/compilation_cache/cache_hits"
_lock = threading.Lock()
_hits = 0
_listening = False


def _on_event(event: str, **_kwargs: object) -> None:
    global _hits
    if event == _HIT:
        with _lock:
            _hits += 1


def cache_hits() -> int:
    """Hits so far in this process (the listener is registered at the first call)."""
    global _listening
    with _lock:
        if not _listening:
            from jax import monitoring

            monitoring.register_event_listener(_on_event)
            _listening = True
        return _hits
