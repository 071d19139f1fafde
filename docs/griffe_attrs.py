"""A griffe extension that gives attrs classes the ``__init__`` attrs writes for them.

griffe reads source, and an attrs class has no ``__init__`` in its source: attrs makes
one when the class is created. Without it the API reference shows a class without a
signature and a parameter table without types or defaults. This extension imports
each class of the package (the docs build imports ``trio_session`` anyway), and for
one that ``attrs.has``, adds an ``__init__`` whose parameters are those of the real
one: the public alias of a private field (``api_key`` for ``_api_key``), keyword-only
where the field is, in attrs' order. Each parameter takes its annotation from the
field's annotation in the source (so types link to their pages) and its default as
written in the source (``DEFAULT_TIMEOUTS`` rather than its repr).

It also lists, in the class docstring's ``Args:`` section, each parameter the class
inherits and does not describe itself, with the description from the nearest base
class that has one: ``OpenAIProvider``'s table then shows ``api_key``, ``base_url`` …
of ``HttpProvider`` next to its own ``include_usage``.

Used from ``mkdocs.yml``::

    extensions:
      - docs/griffe_attrs.py:AttrsInit
"""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import griffe

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
}


def _classes(obj: griffe.Module | griffe.Class) -> list[griffe.Class]:
    """Every class defined in ``obj`` and below it (not the ones it imports)."""
    found: list[griffe.Class] = []
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Class):
            found.append(member)
            found.extend(_classes(member))
        elif isinstance(member, griffe.Module):
            found.extend(_classes(member))
    return found


def _runtime_class(cls: griffe.Class) -> type | None:
    """The class itself, imported; ``None`` if it cannot be."""
    try:
        value = griffe.dynamic_import(cls.path)
    except ImportError:
        return None
    return value if isinstance(value, type) else None


def _source_attribute(cls: griffe.Class, name: str) -> griffe.Attribute | None:
    """The attribute ``name`` as written in ``cls`` or the nearest base class."""
    for klass in (cls, *cls.mro()):
        member = klass.members.get(name)
        if isinstance(member, griffe.Attribute):
            return member
    return None


def _field_call_default(value: str | griffe.Expr | None) -> str | griffe.Expr | None:
    """The default written in ``attrs.field(default=X)`` or ``attrs.field(factory=f)``."""
    if not isinstance(value, griffe.ExprCall):
        return value  # ``x: int = 5``: the value is the default
    if not str(value.function).endswith("field"):
        return value
    for argument in value.arguments:
        if isinstance(argument, griffe.ExprKeyword):
            if argument.name == "default":
                return _factory_default(argument.value)
            if argument.name == "factory":
                return _EMPTY.get(str(argument.value), f"{argument.value}()")
    return None


#: How a default made by one of these factories reads: as the value it makes.
_EMPTY = {"dict": "{}", "list": "[]", "tuple": "()", "set": "set()"}


def _factory_default(value: str | griffe.Expr) -> str | griffe.Expr:
    """``attrs.Factory(list)`` as ``[]``; any other default as written."""
    if isinstance(value, griffe.ExprCall) and str(value.function).endswith("Factory"):
        made = str(value.arguments[0]) if value.arguments else ""
        if made in _EMPTY:
            return _EMPTY[made]
        # A lambda or a private helper says nothing to a reader: the docstring does.
        # ``...``, not ``…``: the signature stays Python, which ruff formats to fit.
        return "..." if made.startswith(("lambda", "_")) else f"{made}()"
    return value


def _literal_repr(value: object) -> str:
    """A default the source does not show: its repr if it is a plain literal.

    Anything else (an environment mapping, an object) reads as ``...``: the docs are no
    place for values only known when the docs were built.
    """
    plain = (type(None), bool, int, float, str, bytes)
    if isinstance(value, plain) or (
        isinstance(value, tuple) and all(isinstance(v, plain) for v in value)
    ):
        return repr(value)
    return "..."


def _parameters(cls: griffe.Class, runtime: type) -> list[griffe.Parameter]:
    """The parameters of the ``__init__`` attrs made for ``runtime``, as griffe ones."""
    fields = {field.alias: field for field in attrs.fields(runtime) if field.init}
    parameters: list[griffe.Parameter] = []
    signature = inspect.signature(runtime.__init__)  # type: ignore[misc]
    for name, param in list(signature.parameters.items())[1:]:  # after ``self``
        field = fields.get(name)
        source = _source_attribute(cls, field.name) if field is not None else None
        annotation: str | griffe.Expr | None = source.annotation if source else None
        if annotation is None and field is not None and field.type is not None:
            annotation = field.type if isinstance(field.type, str) else repr(field.type)
        default: str | griffe.Expr | None = None
        if param.default is not inspect.Parameter.empty:
            default = _field_call_default(source.value) if source else None
            if default is None:
                default = _literal_repr(param.default)
        parameters.append(
            griffe.Parameter(name, annotation=annotation, kind=_KINDS[param.kind], default=default)
        )
    return parameters


def _described(cls: griffe.Class) -> dict[str, griffe.DocstringParameter]:
    """The ``Args:`` entries of ``cls``'s own docstring, by name."""
    if cls.docstring is None:
        return {}
    entries: dict[str, griffe.DocstringParameter] = {}
    for section in cls.docstring.parsed:
        if isinstance(section, griffe.DocstringSectionParameters):
            entries.update((p.name, p) for p in section.value)
    return entries


def _inherit_descriptions(cls: griffe.Class) -> None:
    """Describe, in ``cls``'s docstring, each parameter a base class describes."""
    if cls.docstring is None or "__init__" not in cls.members:
        return
    own = _described(cls)
    inherited: list[griffe.DocstringParameter] = []
    for parameter in cls.members["__init__"].parameters:  # type: ignore[union-attr]
        if parameter.name == "self" or parameter.name in own:
            continue
        for base in cls.mro():
            entry = _described(base).get(parameter.name)
            if entry is not None:
                inherited.append(
                    griffe.DocstringParameter(
                        parameter.name,
                        description=entry.description,
                        annotation=parameter.annotation,
                        value=parameter.default,
                    )
                )
                break
    if not inherited:
        return
    sections = cls.docstring.parsed
    for section in sections:
        if isinstance(section, griffe.DocstringSectionParameters):
            section.value[:0] = inherited  # the base's parameters come first, as in the signature
            return
    sections.append(griffe.DocstringSectionParameters(inherited))


class AttrsInit(griffe.Extension):
    """Add the attrs-made ``__init__`` to every attrs class of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Add the ``__init__`` methods, then the inherited parameter descriptions."""
        done: list[griffe.Class] = []
        for cls in _classes(pkg):
            if "__init__" in cls.members:
                continue
            runtime = _runtime_class(cls)
            if runtime is None or not attrs.has(runtime) or "__init__" not in vars(runtime):
                continue
            init = griffe.Function(
                "__init__",
                lineno=cls.lineno,
                endlineno=cls.lineno,
                parent=cls,
                parameters=griffe.Parameters(
                    griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword),
                    *_parameters(cls, runtime),
                ),
                returns="None",
            )
            cls.set_member("__init__", init)
            done.append(cls)
        # Only now: parsing a docstring reads the types of the ``__init__`` parameters.
        for cls in done:
            _inherit_descriptions(cls)
