"""Command groups whose commands are imported when they run: the command line's start-up.

A :class:`LazyGroup` knows each of its commands by name, the ``module:attribute`` that defines it
and the one-line summary its group's ``--help`` lists. ``cooplab --help`` lists the summaries
without importing a single command; ``cooplab sweep ...`` imports :mod:`cooplab.cli.runs` and
nothing of the other commands. This is click's "lazy group" pattern (the same as Inspect AI's
command line), on Typer's group class.

The summary of a command defined by a function is the first sentence of its docstring (what
Click lists); that of a sub-group is the help it is mounted with. A test loads every command and
checks that the listing is the same as the loaded commands' own (tests/cli/test_startup.py).
"""

from __future__ import annotations

import importlib
from gettext import gettext as _
from typing import Any, Callable, NamedTuple, cast

import typer
from typer.core import TyperGroup

try:  # Typer >= 0.20 vendors Click; older releases depend on it
    from typer._click.utils import make_default_short_help
except ImportError:  # pragma: no cover
    import click.utils

    # Click >= 8.5 keeps the name as a deprecated alias its module __getattr__ types as object; the older
    # Click an older Typer brings has the function itself
    make_default_short_help = cast(Callable[[str, int], str], click.utils.make_default_short_help)


class Lazy(NamedTuple):
    """One command of a :class:`LazyGroup`: where it is defined and what the listing says of it."""

    target: str  # "module:attribute": a Typer app (a sub-group) or a command function
    summary: str  # a function's first docstring sentence, or the help a sub-group is mounted with


def load(name: str, entry: Lazy) -> Any:
    """The Click command of ``entry`` (importing its module), named ``name``."""
    module, _sep, attr = entry.target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    holder = typer.Typer(rich_markup_mode=None, add_completion=False)
    if isinstance(obj, typer.Typer):
        holder.add_typer(obj, name=name, help=entry.summary)
        return typer.main.get_group(holder).commands[name]
    holder.command(name)(obj)
    return typer.main.get_command(holder)  # one command: the command itself


def light_help(option: Any) -> Any:
    """``option`` (a group's ``--help``) checked without pydantic. Typer coerces every option value
    that is not already a bool through a pydantic ``TypeAdapter``, and a ``--help`` that was not
    given has the value None: so every group on the way to ``cooplab run cpr --help`` would import
    pydantic (several times Python's own start-up) for nothing. A flag's value needs no coercion.
    Uses Typer's private coercion classes (typer 0.29); with another Typer it changes nothing."""
    try:
        from typer._coercion import PassThroughRuntimeParam

        if option is not None and getattr(option, "_runtime_param", False) is None:
            option._runtime_param = PassThroughRuntimeParam(
                parameter_info=option.type_descriptor.parameter_info, annotation=bool
            )
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another Typer: only slower
        pass
    return option


class LightHelp:
    """Mixin of a Typer group whose ``--help`` does not load pydantic (:func:`light_help`)."""

    def get_help_option(self, ctx: Any) -> Any:
        return light_help(super().get_help_option(ctx))  # type: ignore[misc]


class LazyGroup(LightHelp, TyperGroup):
    """A Typer group that imports a command when it is asked for by name (to run it or show its
    ``--help``), and lists every command from :attr:`lazy` without importing any. Commands
    registered on the group's Typer app the usual way come first when they share a name."""

    lazy: dict[str, Lazy] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        eager = super().list_commands(ctx)
        return [*self.lazy, *(n for n in eager if n not in self.lazy)]

    def get_command(self, ctx: Any, name: str) -> Any:
        cmd = super().get_command(ctx, name)
        if cmd is None and name in self.lazy:
            cmd = load(name, self.lazy[name])
            self.add_command(cmd, name)
        return cmd

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Click's listing of the commands, with the summaries of those not imported yet."""
        shown = [
            n
            for n in self.list_commands(ctx)
            if (not self.commands[n].hidden if n in self.commands else n in self.lazy)
        ]
        if not shown:
            return
        limit = formatter.width - 6 - max(len(n) for n in shown)
        rows = [
            (
                n,
                self.commands[n].get_short_help_str(limit)
                if n in self.commands
                else make_default_short_help(self.lazy[n].summary, limit),
            )
            for n in shown
        ]
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)


def lazy_group(name: str, table: dict[str, Lazy]) -> type[LazyGroup]:
    """A :class:`LazyGroup` class over ``table`` (name -> :class:`Lazy`), for ``typer.Typer(cls=...)``."""
    return type(f"{name.title()}LazyGroup", (LazyGroup,), {"lazy": dict(table)})
