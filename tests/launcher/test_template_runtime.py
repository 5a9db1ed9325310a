"""elxpk/create/template_runtime.py runs the precompiled templates without Jinja: the same text as Jinja
renders, byte for byte, and a generator that refuses to write code that runtime cannot run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from elxpk.create import template_build, template_runtime
from elxpk.create.checks import spec_from_flags
from elxpk.create.render import template_values
from tests.launcher.test_properties import valid_flags


def both(name: str, values: dict) -> tuple[str, str]:
    """`name` rendered by the precompiled runtime and by Jinja from the source."""
    compiled = template_build.precompiled()
    assert compiled is not None, "stale compiled templates: run python -m elxpk.create.template_build"
    return (compiled.get_template(name).render(**values),
            template_build.environment().get_template(name).render(**values))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_flags())
def test_random_specs_render_the_same_text_as_jinja(flags):
    ours, jinja = both(*template_values(spec_from_flags(**flags)))
    assert ours == jinja


@pytest.mark.parametrize("flags", [
    dict(tpu_type=None, device_type="h100-80gb-8", num_nodes="2", spot=True),  # the GPU template
    dict(tpu_type="v5p-8", spot=True),  # the capacity parts
    dict(tpu_type="v6e-16", reservation="projects/p/reservations/r", headless=True, command=None),
    dict(no_pathways=True, flex_start=True, num_slices="2"),
])
def test_every_template_renders_the_same_text_as_jinja(flags):
    base = dict(workload="run-1", tpu_type="v5litepod-16", command="python3 train.py")
    spec = spec_from_flags(**{k: v for k, v in {**base, **flags}.items() if v is not None})
    ours, jinja = both(*template_values(spec))
    assert ours == jinja


def test_undefined_names_raise_as_jinjas_strict_undefined():
    compiled = template_build.precompiled()
    with pytest.raises(template_runtime.UndefinedError, match="'spec' is undefined"):
        compiled.get_template("multi_controller.yaml.j2").render()
    undefined = template_runtime.Environment({}).getattr(object(), "queue")
    for use in (str, bool, iter, len, lambda u: u.name, lambda u: u == 1):
        with pytest.raises(template_runtime.UndefinedError, match="'object' object has no attribute 'queue'"):
            use(undefined)


def test_attribute_and_item_lookup_fall_back_to_each_other_as_in_jinja():
    env = template_runtime.Environment({})
    assert env.getattr({"queue": "q"}, "queue") == "q"  # a mapping's key through `x.queue`
    assert env.getitem(spec_from_flags(workload="w", tpu_type="v5p-8", command="c"), "workload") == "w"
    assert [(item, loop.first, loop.last, loop.index) for item, loop in
            template_runtime.LoopContext("ab", None)] == [("a", True, False, 1), ("b", False, True, 2)]


@pytest.mark.parametrize("source, what", [
    ("{% for x in range(3) %}{{ x|num }}{% endfor %}", "Jinja's global 'range'"),
    ("{{ name|upper|q }}", "the filter 'upper'"),
    ("{% if x is defined %}{% endif %}", "the test 'defined'"),
    ("{% for x in xs %}{{ loop.cycle('a', 'b')|q }}{% endfor %}", "loop.cycle"),
    ("{% macro m() %}x{% endmacro %}{{ m()|q }}", "Macro"),
    ("{% set ns = namespace(a=1) %}", "Jinja's global 'namespace'"),
    ("{% extends 'pathways.yaml.j2' %}", "context.blocks"),
])
def test_generate_refuses_what_the_runtime_does_not_provide(source, what):
    env = template_build.environment()
    code = env.compile(source, "t", "t", raw=True, defer_init=True)
    assert what in template_build.unsupported_uses(code)
