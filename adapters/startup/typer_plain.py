"""Turning a command line's strings into parameter values without pydantic where it is plain
(installed by ``adapters.startup.coercion`` on the typer release it was checked against).

typer (0.29) coerces every parameter's value through a pydantic ``TypeAdapter``: the first
value a command receives imports pydantic (~40 ms) and each parameter builds its adapter
(a few ms each), so ``letterlog list ACCOUNT`` spent ~190 ms parsing its arguments. Nearly
every letterlog parameter is a ``str``, an ``int`` (perhaps with ``min``/``max``), a
``Path`` or a list of those: ``PlainParam`` converts such a value directly when the
conversion is certain (a string; a run of digits within the range; a non-empty path) and
hands anything else (an out-of-range number, a float, ``1_000``) to typer's own pydantic
coercion, so what is accepted and every error message stay typer's.
``tests/unit/test_cli_coercion.py`` checks both agree on every parameter of the tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_path

_INT = re.compile(r"-?[0-9]{1,18}")
_PLAIN = (str, int, bool, Path)
_NO_FALLBACK = object()


@dataclass(frozen=True)
class PlainParam(RuntimeParam):
    """A ``str``, ``int``, ``bool`` or ``Path`` parameter (or a list of one), converted directly."""

    descriptor: TypeDescriptor

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, (list, tuple)):
            (item_type,) = get_args(self.annotation)
            items = [self._plain(v, item_type, param, ctx) for v in value]
            if _NO_FALLBACK not in items:
                return items
        else:
            plain = self._plain(value, self.annotation, param, ctx)
            if plain is not _NO_FALLBACK:
                return plain
        return build_runtime_param(self.descriptor)._coerce_value(value, param, ctx)

    def _plain(self, value: Any, kind: type, param: Any, ctx: Any) -> Any:
        if kind is bool or kind is str:
            return value if type(value) is kind else _NO_FALLBACK
        if kind is int:
            return self._number(value)
        if type(value) is str and value:
            value = Path(value)
        if not isinstance(value, Path):
            return _NO_FALLBACK
        info = self.parameter_info
        return coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)

    def _number(self, value: Any) -> Any:
        if type(value) is str and _INT.fullmatch(value):
            value = int(value)
        if type(value) is not int:
            return _NO_FALLBACK
        info = self.parameter_info
        if (info.min is not None and value < info.min) or (
                info.max is not None and value > info.max):
            return _NO_FALLBACK  # typer words the range error
        return value


def _plain_kind(annotation: Any) -> bool:
    if get_origin(annotation) is list:
        args = get_args(annotation)
        return len(args) == 1 and args[0] in _PLAIN
    return annotation in _PLAIN


def runtime_param(descriptor: TypeDescriptor) -> RuntimeParam:
    """typer's ``build_runtime_param``, plain for the plain kinds of parameter."""
    info = descriptor.parameter_info
    if (descriptor.file_annotation is None and info.parser is None and not info.clamp
            and info.path_type is None and _plain_kind(descriptor.annotation)):
        return PlainParam(annotation=descriptor.annotation, parameter_info=info,
                          descriptor=descriptor)
    return build_runtime_param(descriptor)
