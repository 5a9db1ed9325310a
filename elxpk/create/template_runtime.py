"""Runs the precompiled templates (elxpk/create/compiled_templates/) without importing Jinja.

Jinja compiles each template to a Python generator, `root(context)`, that needs only a few runtime
helpers: a context to resolve names, the environment's `getattr`/`getitem`/`finalize`/`filters`/`tests`,
`{% include %}`, and the loop variable. Importing jinja2 for them costs about a fifth of
`workload create --dry-run` (its package import pulls in the lexer, parser, compiler and bytecode
cache that a compiled template never calls), so this module provides just those, with Jinja's own
semantics (copied from jinja2.runtime and jinja2.environment, non-sandboxed, StrictUndefined).

It runs only code it knows: `template_build.generate` refuses to write a module that uses anything
outside SUPPORTED, and tests/launcher/test_template_runtime.py renders every template both ways and
compares the text byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import FunctionType, ModuleType
from typing import Any

from elxpk.create.yamlquote import number, only_rendered, quote


class TemplateRuntimeError(Exception):
    """An error raised while rendering (Jinja's exception of the same name)."""


class UndefinedError(TemplateRuntimeError):
    """A template used a name that the render call did not pass (Jinja's StrictUndefined)."""


class _Missing:
    def __repr__(self) -> str:
        return "missing"


missing: Any = _Missing()  # Jinja's sentinel for "no such name"; the compiled code compares with `is`


class Undefined:
    """Jinja's StrictUndefined: any use (print, test, iterate, compare, attribute) raises."""

    def __init__(self, hint: str | None = None, obj: Any = missing, name: str | None = None,
                 exc: type[Exception] = UndefinedError) -> None:
        self._hint, self._obj, self._name = hint, obj, name

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        if self._hint:
            raise UndefinedError(self._hint)
        if self._obj is missing:
            raise UndefinedError(f"{self._name!r} is undefined")
        raise UndefinedError(f"{type(self._obj).__name__!r} object has no attribute {self._name!r}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._fail()

    __str__ = __bool__ = __iter__ = __len__ = __eq__ = __ne__ = __hash__ = __call__ = _fail
    __getitem__ = __contains__ = __add__ = __lt__ = __le__ = __gt__ = __ge__ = __int__ = _fail


class LoopContext:
    """`loop` inside `{% for %}`: iterating it yields (item, loop); the index and first/last flags."""

    def __init__(self, iterable: Iterable[Any], undefined: Any, recurse: Any = None, depth0: int = 0) -> None:
        self._items = list(iterable)
        self.index0 = -1

    def __iter__(self) -> Iterator[tuple[Any, LoopContext]]:
        for index0, item in enumerate(self._items):
            self.index0 = index0
            yield item, self

    @property
    def length(self) -> int:
        return len(self._items)

    @property
    def index(self) -> int:
        return self.index0 + 1

    @property
    def revindex0(self) -> int:
        return self.length - self.index

    @property
    def revindex(self) -> int:
        return self.length - self.index0

    @property
    def first(self) -> bool:
        return self.index0 == 0

    @property
    def last(self) -> bool:
        return self.index == self.length


def str_join(seq: Iterable[Any]) -> str:
    """`a ~ b`: the str() of each part, concatenated."""
    return "".join(map(str, seq))


def identity(value: Any) -> Any:
    return value


def internalcode(function: Callable[..., Any]) -> Callable[..., Any]:
    return function


def _soft_str(value: Any) -> str:
    """Jinja's `|string` (markupsafe.soft_str): str() of anything that is not already text."""
    return value if isinstance(value, str) else str(value)


def _unsupported(*args: Any, **kwargs: Any) -> Any:
    raise TemplateRuntimeError("a Jinja feature elxpk/create/template_runtime.py does not provide")


# Names every compiled module imports; only those in SUPPORTED_NAMES may appear in its code.
Macro = Markup = Namespace = TemplateNotFound = TemplateReference = escape = markup_join = _unsupported

# What the compiled code may use: template_build.generate checks each module against these.
SUPPORTED_NAMES = frozenset({"LoopContext", "TemplateRuntimeError", "Undefined", "identity", "internalcode",
                             "missing", "str_join"})
SUPPORTED_ENVIRONMENT = frozenset({"concat", "filters", "finalize", "get_template", "getattr", "getitem", "tests",
                                   "undefined"})
SUPPORTED_CONTEXT = frozenset({"get_all", "resolve_or_missing"})
FILTERS: dict[str, Callable[[Any], Any]] = {"q": quote, "num": number, "string": _soft_str}
TESTS: dict[str, Callable[[Any], bool]] = {"none": lambda value: value is None}


class Context:
    """The names a template sees: the render call's keywords (an include shares its parent's)."""

    def __init__(self, parent: Mapping[str, Any]) -> None:
        self.parent = parent

    def resolve_or_missing(self, key: str) -> Any:
        return self.parent.get(key, missing)

    def get_all(self) -> Mapping[str, Any]:
        return self.parent


class Template:
    """One compiled module, its `root` bound to the environment that runs it."""

    def __init__(self, environment: Environment, module: ModuleType) -> None:
        root = module.root
        # A private copy of the module's globals: the module object stays as Python imported it.
        self.root_render_func = FunctionType(root.__code__, {**vars(module), "environment": environment},
                                             root.__name__, root.__defaults__, root.__closure__)

    def new_context(self, vars: Mapping[str, Any], shared: bool = False,
                    locals: Mapping[str, Any] | None = None) -> Context:
        if locals and any(value is not missing for value in locals.values()):
            raise TemplateRuntimeError("an include with local variables is not supported")
        return Context(vars if shared else dict(vars))

    def render(self, **values: Any) -> str:
        return "".join(self.root_render_func(self.new_context(values)))


class Environment:
    """The precompiled templates by name, and the environment calls their code makes."""

    undefined = Undefined
    filters = FILTERS
    tests = TESTS
    concat = "".join

    def __init__(self, modules: Mapping[str, ModuleType]) -> None:
        self._templates = {name: Template(self, module) for name, module in modules.items()}

    def get_template(self, name: str, parent: str | None = None) -> Template:
        return self._templates[name]

    @staticmethod
    def finalize(value: Any) -> Any:
        return only_rendered(value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        """`obj.attribute` in a template: the attribute, else the item, else undefined (as Jinja)."""
        try:
            return getattr(obj, attribute)
        except AttributeError:
            pass
        try:
            return obj[attribute]
        except (TypeError, LookupError, AttributeError):
            return self.undefined(obj=obj, name=attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        """`obj[argument]` in a template: the item, else the attribute of that name, else undefined."""
        try:
            return obj[argument]
        except (AttributeError, TypeError, LookupError):
            if isinstance(argument, str):
                try:
                    return getattr(obj, argument)
                except AttributeError:
                    pass
            return self.undefined(obj=obj, name=argument)
