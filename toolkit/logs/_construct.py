"""Build frozen, slotted dataclass instances fast on the classifier's hot path.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``: about 2 us for
``LogEvent``'s fields, a third of the per-line budget on a busy server's log. Storing through the slot
descriptors takes about 0.6 us; the instances are the same in every respect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

__all__ = ["fast_constructor"]

T = TypeVar("T")


def fast_constructor(cls: type[T]) -> Callable[..., T]:
    """A function taking every field positionally, in declaration order, returning a ``cls``.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True, slots=True)
    ... class Point:
    ...     x: int
    ...     y: int = 0
    >>> fast_constructor(Point)(1, 2) == Point(1, 2)
    True
    """
    if not is_dataclass(cls) or "__slots__" not in cls.__dict__ or any("__post_init__" in vars(k) for k in cls.__mro__):
        raise TypeError(f"{cls.__name__} must be a slotted dataclass without __post_init__ to be built field by field")
    names = [f.name for f in fields(cls)]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    # the slots' descriptors
    namespace.update({f"_set{i}": cls.__dict__[name].__set__ for i, name in enumerate(names)})
    body = "".join(f"    _set{i}(obj, {name})\n" for i, name in enumerate(names))
    source = f"def make({', '.join(names)}):\n    obj = _new(_cls)\n{body}    return obj\n"
    exec(source, namespace)  # noqa: S102  (generated from field names only, as dataclasses itself does)
    maker: Callable[..., T] = namespace["make"]
    maker.__qualname__ = maker.__name__ = f"make_{cls.__name__}"
    return maker
