"""Settings sections, declared once and checked strictly: the rules every config.yaml section follows.

A section is a class of annotated attributes declared with :func:`setting`. The annotation is
the type: ``int``, ``float``, ``bool``, ``str``, ``Literal[...]``, ``list[str]``, ``list[int]`` or another
section, each optionally ``| None``. Checking a mapping against it (:meth:`Section.from_data`):

* unknown keys and keys that are not text are problems, never ignored;
* types are strict: ``true`` is not a number, ``"5"`` is not an integer, ``2.0`` is not an
  integer; an integer is a number (and becomes a float);
* numbers are bounded (``ge``/``gt``/``le``/``lt``, and ``allow_inf_nan=False`` refuses inf and
  nan), text and lists are length-limited (``max_length``);
* :class:`validates` functions check what a type cannot, after the type (a ``ValueError``
  is the problem's reason).

Every problem is collected, with its location (``("tools", "enabled", 3)``), in the order the
settings are declared, a section's unknown keys after its settings. An assignment to a setting
is checked the same way. This is a small schema of vigil's own, not pydantic: pydantic did this
job once, and importing it and building the models cost about a fifth of a one-shot chat's CPU.
"""

from __future__ import annotations

import math
import operator
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal, Mapping, Self

_MISSING: Any = object()
_BAD: Any = object()  # a value that failed its check (its problem is recorded)

Loc = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the checked data: where, what kind (``int_type``,
    ``extra_forbidden``, ``value_error``, ...), the reason in words, and the offending value."""

    loc: Loc
    type: str
    msg: str
    input: Any


class SettingsInvalid(ValueError):
    """Data that does not satisfy a section; ``problems`` lists every problem, first first."""

    def __init__(self, section: str, problems: list[Problem]) -> None:
        self.problems = problems
        first = problems[0]
        where = ".".join(str(part) for part in first.loc) or section
        super().__init__(f"{len(problems)} problem(s) in {section}; first: {where}: {first.msg}")


class ValueProblem(ValueError):
    """Raised by a :class:`validates` function about one item of a list (``at``: its index)."""

    def __init__(self, message: str, *, at: Loc = ()) -> None:
        super().__init__(message)
        self.at = at


class Spec:
    """One declared setting (made by :func:`setting`; its type comes from the annotation)."""

    __slots__ = ("default", "factory", "ge", "gt", "le", "lt", "max_length", "finite", "description",
                 "name", "base", "item", "choices", "optional", "section", "checks")

    def __init__(self, default: Any, factory: Callable[[], Any] | None, *, ge: float | None, gt: float | None,
                 le: float | None, lt: float | None, max_length: int | None, finite: bool, description: str) -> None:
        self.default, self.factory = default, factory
        self.ge, self.gt, self.le, self.lt = ge, gt, le, lt
        self.max_length, self.finite, self.description = max_length, finite, description
        self.name = ""
        self.base: type | None = None
        """``int``, ``float``, ``bool``, ``str``, ``list`` or a section class; ``None`` for a
        ``Literal`` (see ``choices``)."""
        self.item: type = str
        """The type of a list's items: ``str`` or ``int`` (bounded by ``ge``/``le``)."""
        self.choices: tuple[Any, ...] = ()
        self.optional = False
        self.section: type[Section] | None = None
        self.checks: list[Callable[[Any], Any]] = []

    def initial(self) -> Any:
        return self.factory() if self.factory is not None else self.default


def setting(
    default: Any = _MISSING,
    *,
    default_factory: Callable[[], Any] | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    max_length: int | None = None,
    allow_inf_nan: bool = True,
    description: str = "",
) -> Any:
    """Declare a setting: its default (or ``default_factory``), bounds and a description."""
    if default is _MISSING and default_factory is None:
        raise TypeError("a setting needs a default or a default_factory")
    return Spec(default, default_factory, ge=ge, gt=gt, le=le, lt=lt, max_length=max_length,
                finite=not allow_inf_nan, description=description)


class validates:
    """``@validates("name", ...)`` over a ``classmethod`` ``(cls, value) -> value``: run after
    the type check of those settings; a ``ValueError`` is the problem, the result the value."""

    def __init__(self, *names: str) -> None:
        self.names = names

    def __call__(self, method: Any) -> Any:
        return _Check(self.names, method)


class _Check:
    def __init__(self, names: tuple[str, ...], method: Any) -> None:
        self.names = names
        self.method = method


_BOUNDS = (
    ("gt", operator.gt, "greater_than", "greater than"),
    ("ge", operator.ge, "greater_than_equal", "greater than or equal to"),
    ("lt", operator.lt, "less_than", "less than"),
    ("le", operator.le, "less_than_equal", "less than or equal to"),
)
_TYPE_WORDS = {int: ("int_type", "a valid integer"), bool: ("bool_type", "a valid boolean"),
               str: ("string_type", "a valid string"), list: ("list_type", "a valid list, such as [a, b]")}


_NOT_UNICODE = "Input should be a valid string, unable to parse raw data as a unicode string"


def _encodable(text: str) -> bool:
    """Whether ``text`` is real Unicode text: a lone surrogate (YAML's ``"\\ud800"``) cannot
    be written to a file, a request or a terminal."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _number(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else repr(value)


def _outside(spec: Spec, value: float) -> tuple[str, str] | None:
    """(problem type, reason) of the first bound ``value`` breaks, or ``None``."""
    for kind, holds, name, words in _BOUNDS:
        bound = getattr(spec, kind)
        if bound is not None and not holds(value, bound):
            return name, f"Input should be {words} {_number(bound)}"
    return None


def _check_value(spec: Spec, value: Any, loc: Loc, out: list[Problem]) -> Any:
    """``value`` checked against ``spec`` (converted where a float takes an int), or ``_BAD``."""
    if value is None and spec.optional:
        return None
    base = spec.base
    if spec.section is not None:
        checked = spec.section._checked(value, loc, out)
        if checked is _BAD:
            return _BAD
        value = checked
    elif base is None:  # a Literal
        if not any(type(value) is type(choice) and value == choice for choice in spec.choices):
            shown = [repr(choice) for choice in spec.choices]
            words = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
            out.append(Problem(loc, "literal_error", f"Input should be {words}", value))
            return _BAD
    elif base is float:
        if type(value) is int:
            try:
                value = float(value)
            except OverflowError:
                out.append(Problem(loc, "finite_number", "Input should be a finite number", value))
                return _BAD
        elif type(value) is not float:
            out.append(Problem(loc, "float_type", "Input should be a valid number", value))
            return _BAD
        if spec.finite and not math.isfinite(value):
            out.append(Problem(loc, "finite_number", "Input should be a finite number", value))
            return _BAD
    elif type(value) is not base:
        kind, words = _TYPE_WORDS[base]  # type: ignore[index]
        out.append(Problem(loc, kind, f"Input should be {words}", value))
        return _BAD
    if spec.max_length is not None and base in (str, list) and len(value) > spec.max_length:
        if base is str:
            reason = f"String should have at most {spec.max_length:,} characters"
        else:  # its items are not looked at: one problem, not one per item
            reason = f"List should have at most {spec.max_length:,} items after validation, not {len(value):,}"
        out.append(Problem(loc, "string_too_long" if base is str else "too_long", reason, value))
        return _BAD
    if base is str and not _encodable(value):
        out.append(Problem(loc, "string_unicode", _NOT_UNICODE, value))
        return _BAD
    if base is list:
        bad = False
        for index, item in enumerate(value):
            if type(item) is not spec.item:
                kind, words = _TYPE_WORDS[spec.item]
                out.append(Problem((*loc, index), kind, f"Input should be {words}", item))
                bad = True
            elif spec.item is str and not _encodable(item):
                out.append(Problem((*loc, index), "string_unicode", _NOT_UNICODE, item))
                bad = True
            elif spec.item is int and (outside := _outside(spec, item)) is not None:
                out.append(Problem((*loc, index), outside[0], outside[1], item))
                bad = True
        if bad:
            return _BAD
        value = list(value)
    if base in (int, float) and (outside := _outside(spec, value)) is not None:
        out.append(Problem(loc, outside[0], outside[1], value))
        return _BAD
    for check in spec.checks:
        try:
            value = check(value)
        except ValueProblem as exc:
            out.append(Problem((*loc, *exc.at), "value_error", f"Value error, {exc}", value))
            return _BAD
        except ValueError as exc:
            out.append(Problem(loc, "value_error", f"Value error, {exc}", value))
            return _BAD
    return value


def _declare(owner: type[Section], spec: Spec, annotation: Any) -> None:
    """Fill in ``spec``'s type from its evaluated annotation."""
    args: tuple[Any, ...] = (annotation,)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = typing.get_args(annotation)
    kinds = [arg for arg in args if arg is not type(None)]
    spec.optional = len(kinds) < len(args)
    if len(kinds) != 1:
        raise TypeError(f"{owner.__name__}.{spec.name}: one type (optionally | None) per setting")
    kind = kinds[0]
    origin = typing.get_origin(kind)
    if origin is Literal:
        spec.base, spec.choices = None, typing.get_args(kind)
    elif origin is list and typing.get_args(kind) in ((str,), (int,)):
        spec.base, spec.item = list, typing.get_args(kind)[0]
    elif isinstance(kind, type) and issubclass(kind, Section):
        spec.base = spec.section = kind
    elif kind in (int, float, bool, str):
        spec.base = kind
    else:
        raise TypeError(f"{owner.__name__}.{spec.name}: unsupported setting type {kind!r}")


class Section:
    """Base of a settings section (see the module docstring). Construct one from keyword
    values (checked), or from a mapping with :meth:`from_data`."""

    __slots__ = ("__dict__", "_fields_set")
    _specs: ClassVar[dict[str, Spec]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs = dict(cls._specs)
        module = vars(sys.modules[cls.__module__])
        annotations = cls.__dict__.get("__annotations__", {})
        checks: list[_Check] = []
        for name, value in list(cls.__dict__.items()):
            if isinstance(value, _Check):
                checks.append(value)
                setattr(cls, name, value.method)
            elif isinstance(value, Spec):
                value.name = name
                annotation = annotations.get(name)
                if annotation is None:
                    raise TypeError(f"{cls.__name__}.{name}: a setting needs a type annotation")
                if isinstance(annotation, str):  # postponed (from __future__ import annotations)
                    annotation = eval(annotation, module, {cls.__name__: cls})
                _declare(cls, value, annotation)
                specs[name] = value
                delattr(cls, name)  # an instance holds its value; the class holds no stand-in
        for check in checks:
            method = check.method.__func__ if isinstance(check.method, classmethod) else check.method
            for name in check.names:
                if name not in specs:
                    raise TypeError(f"{cls.__name__}: validates unknown setting {name!r}")
                specs[name].checks.append(method.__get__(cls, type(cls)))
        cls._specs = specs

    def __init__(self, **values: Any) -> None:
        problems: list[Problem] = []
        values = type(self).prepare(values)
        checked = self._fill(values, (), problems)
        if problems:
            raise SettingsInvalid(type(self).__name__, problems)
        self._hold(values, checked)

    # -- checking ---------------------------------------------------------------------------
    @classmethod
    def prepare(cls, data: Any) -> Any:
        """Rewrite raw data before it is checked (old key names, say); the default keeps it."""
        return data

    @classmethod
    def from_data(cls, data: Any) -> Self:
        """A section from a mapping; ``SettingsInvalid`` lists every problem."""
        problems: list[Problem] = []
        made = cls._checked(data, (), problems)
        if problems:
            raise SettingsInvalid(cls.__name__, problems)
        return made

    @classmethod
    def _checked(cls, data: Any, loc: Loc, out: list[Problem]) -> Any:
        if isinstance(data, cls):
            return data
        data = cls.prepare(data)
        if not isinstance(data, Mapping):
            out.append(Problem(loc, "model_type", f"Input should be a valid dictionary or instance of {cls.__name__}", data))
            return _BAD
        before = len(out)
        values = cls._fill(data, loc, out)
        if len(out) > before:
            return _BAD
        made = object.__new__(cls)
        made._hold(data, values)
        return made

    def _hold(self, given: Mapping[Any, Any], values: dict[str, Any]) -> None:
        """Take checked ``values``; those named in ``given`` count as set explicitly."""
        object.__setattr__(self, "_fields_set", {key for key in given if key in self._specs})
        self.__dict__.update(values)

    @classmethod
    def _fill(cls, data: Mapping[Any, Any], loc: Loc, out: list[Problem]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, spec in cls._specs.items():
            if name in data:
                values[name] = _check_value(spec, data[name], (*loc, name), out)
            else:
                values[name] = spec.initial()
        for key in data:
            if not isinstance(key, str):
                out.append(Problem((*loc, key), "invalid_key", "Keys should be strings", key))
            elif key not in cls._specs:
                out.append(Problem((*loc, key), "extra_forbidden", "Extra inputs are not permitted", data[key]))
        return values

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "_fields_set":  # copy and pickle restore it
            object.__setattr__(self, name, value)
            return
        spec = self._specs.get(name)
        if spec is None:
            raise AttributeError(f"{type(self).__name__} has no setting {name!r}")
        problems: list[Problem] = []
        checked = _check_value(spec, value, (name,), problems)
        if problems:
            raise SettingsInvalid(type(self).__name__, problems)
        self.__dict__[name] = checked
        self._fields_set.add(name)

    # -- reading ----------------------------------------------------------------------------
    @classmethod
    def specs(cls) -> Mapping[str, Spec]:
        """The declared settings by name, in declaration order."""
        return cls._specs

    @property
    def fields_given(self) -> set[str]:
        """The settings given explicitly (in the data, a keyword or an assignment)."""
        return self._fields_set

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain nested data of JSON's types."""
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if isinstance(value, Section):
                value = value.as_dict()
            elif isinstance(value, list):
                value = list(value)
            out[name] = value
        return out

    def copy_with(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A shallow copy with ``update`` applied as given (not checked: the caller vouches for it)."""
        made = object.__new__(type(self))
        made.__dict__.update(self.__dict__)
        fields_set = set(self._fields_set)
        if update:
            unknown = [name for name in update if name not in self._specs]
            if unknown:
                raise AttributeError(f"{type(self).__name__} has no setting {unknown[0]!r}")
            made.__dict__.update(update)
            fields_set.update(update)
        object.__setattr__(made, "_fields_set", fields_set)
        return made

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in self.__dict__.items())
        return f"{type(self).__name__}({inner})"
