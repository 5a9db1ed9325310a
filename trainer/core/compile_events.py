"""Whether a compile was served by jax's persistent compilation cache: jax reports each hit as a monitoring
event ('/jax/compilation_cache/cache_hits', jax/_src/compiler.py) in the thread that asked for the compile,
and nothing else says so. One listener per process counts them by thread; a compile that saw its own
thread's count rise was a cache hit, whatever other threads compiled meanwhile (the live checks, the
restore's helpers: trainer/elastic/step_ahead.py makes the step beside them)."""

from __future__ import annotations

import threading

_HIT = "/jax/compilation_cache/cache_hits"
_lock = threading.Lock()
_hits: dict[int, int] = {}  # thread ident -> hits seen in it
_listening = False


def _on_event(event: str, **_kwargs: object) -> None:
    if event == _HIT:
        with _lock:
            ident = threading.get_ident()
            _hits[ident] = _hits.get(ident, 0) + 1


def cache_hits() -> int:
    """Hits so far in the calling thread (the listener is registered at the first call)."""
    global _listening
    with _lock:
        if not _listening:
            from jax import monitoring

            monitoring.register_event_listener(_on_event)
            _listening = True
        return _hits.get(threading.get_ident(), 0)
