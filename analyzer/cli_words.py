"""Help text that reads like a native command line tool's: ``INPUT...``, ``FILE``, ``DIR``.

Typer's help prints each parameter's Python type (``<bool>`` after a flag, ``<list[Path]>``
after an argument) and shows a required argument as ``{INPUT}`` in the usage line. Every
parameter here carries a word for a metavar instead, so the help shows that word, nothing for a
flag, ``INPUT...`` for an argument that takes several and ``[QUERY]`` for an optional one.
``NativeGroup`` also lists ``analyze``, the main command, first.
"""

from __future__ import annotations

from typer import _click
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

FIRST = ("analyze", "report")  # the main command and its re-render, then the others in code order


class WordArgument(TyperArgument):
    """An argument shown by its metavar alone: ``INPUT...`` / ``[QUERY]``, no ``<type>``."""

    @property
    def display_name_raw(self) -> str:
        name = self.metavar or self.name.upper()
        return f"{name}..." if self.nargs != 1 else name

    def display_type_rich(self, ctx: _click.Context) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        return self.display_name_raw if self.required else f"[{self.display_name_raw}]"


class WordOption(TyperOption):
    """An option shown with its metavar (``--out DIR``), a flag with nothing after it."""

    def display_type_rich(self, ctx: _click.Context) -> str | None:
        if self.is_flag or self.count:
            return None
        return self.metavar or self.display_type(ctx)


_WORDY = {TyperArgument: WordArgument, TyperOption: WordOption}


def wordy(params: list[_click.Parameter]) -> list[_click.Parameter]:
    """The same parameter objects, shown as words (Typer builds them from the annotations, so
    their class is switched here rather than chosen there; neither subclass adds state)."""
    for param in params:
        param.__class__ = _WORDY.get(type(param), type(param))
    return params


class NativeCommand(TyperCommand):
    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        return wordy(super().get_params(ctx))


class NativeGroup(TyperGroup):
    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        return wordy(super().get_params(ctx))

    def list_commands(self, ctx: _click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return [n for n in FIRST if n in names] + [n for n in names if n not in FIRST]
