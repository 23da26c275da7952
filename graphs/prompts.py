"""A task's prompts and their named variants (docs/robustness.md).

A task keeps its prompt texts in ``prompts/`` beside its modules (``tasks/cpr/prompts/effort.txt``).
A **variant** is a folder ``prompts/variants/NAME/`` holding some of those files written another
way: a rewording, the same text as a bulleted list, the options in another order, other
personas. A run picks one by name (``prompt_variant=`` in :func:`cooplab.run`,
``--prompt-variant`` on the command line; recorded in config.json's ``llm`` block); a file the
variant folder lacks is read from ``prompts/`` itself, so a variant that changes one prompt is a
folder with one file. ``original`` is the prompts as they are. Adding a variant needs no code:
make the folder and put the files in it. A variant may say in one line what it changes, in the
folder's ``ABOUT`` file (``cooplab robustness --variants TASK`` lists them).

The text a model is sent changes with the variant, so the response cache (keyed by the
messages) keeps each variant's answers apart by itself.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from cooplab.limits import ConfigError, show

#: the prompts as the task ships them
ORIGINAL = "original"
#: the folder of variants inside a task's prompts
VARIANTS_DIR = "variants"
#: a variant's name: letters, digits, '.', '_' and '-', starting with a letter or digit (never a path)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def package_of(task: Any) -> str | None:
    """The import package whose ``prompts/`` folder holds ``task``'s prompts: the task's own
    ``prompt_package`` if it names one, else the package of the module that defines its class."""
    pkg = getattr(task, "prompt_package", None)
    if isinstance(pkg, str) and pkg:
        return pkg
    module = type(task).__module__ if not isinstance(task, type) else task.__module__
    return module.rpartition(".")[0] or None


def _root(package: str):
    try:
        return resources.files(package).joinpath("prompts")
    except (ModuleNotFoundError, TypeError):
        return None


def variants(package: str | None) -> list[str]:
    """The variants of the prompts of ``package``: ``original`` first, then the folders under
    ``prompts/variants/`` in name order (folders whose name is not a variant name are left out)."""
    root = _root(package) if package else None
    found: list[str] = []
    if root is not None and root.is_dir() and root.joinpath(VARIANTS_DIR).is_dir():
        found = sorted(
            p.name
            for p in root.joinpath(VARIANTS_DIR).iterdir()
            if p.is_dir() and NAME.match(p.name) and p.name != ORIGINAL
        )
    return [ORIGINAL, *found]


def about(package: str, variant: str) -> str:
    """The one line a variant's ``ABOUT`` file says about it ('' when it has none)."""
    if variant == ORIGINAL:
        return "the prompts as the task ships them"
    root = _root(package)
    f = root.joinpath(VARIANTS_DIR, variant, "ABOUT") if root is not None else None
    if f is None or not f.is_file():
        return ""
    return " ".join(f.read_text(encoding="utf-8").split())


def check(task: Any, variant: Any, flag: str = "--prompt-variant") -> str:
    """``variant`` if it is one of ``task``'s prompt variants, else a one-line ConfigError that
    lists the ones there are."""
    names = variants(package_of(task))
    if not isinstance(variant, str) or not NAME.match(variant) or variant not in names:
        name = getattr(task, "name", "") or "this task"
        raise ConfigError(
            f"{flag}: unknown prompt variant {show(variant)} for task {name!r}; its variants are {', '.join(names)} "
            f"(a new one is a folder prompts/{VARIANTS_DIR}/NAME/ beside the task's prompts, docs/robustness.md)"
        )
    problem = fields_differ(package_of(task), variant)
    if problem:
        raise ConfigError(f"{flag}: prompt variant {variant!r}: {problem}")
    return variant


def _fields(template: str) -> set[str] | None:
    """The ``{placeholders}`` of a ``str.format`` template (None when it is not one)."""
    try:
        return {f for _lit, f, _spec, _conv in string.Formatter().parse(template) if f is not None}
    except ValueError:
        return None


def fields_differ(package: str | None, variant: str) -> str:
    """Why a variant's files cannot stand in for the originals ('' when they can): a text file
    whose ``{placeholders}`` are not exactly the original's (a missing one would drop a fact, an
    unknown one fail mid-run), a file with no original, or a JSON file that does not parse."""
    import json

    if variant == ORIGINAL or not package:
        return ""
    root = _root(package)
    if root is None:  # no prompts folder: no variant overrides a file (overridden() is empty)
        return ""
    for name in overridden(package, variant):
        orig = root.joinpath(name)
        if not orig.is_file():
            return (
                f"{name} has no original in the task's prompts (the files there: "
                f"{', '.join(sorted(p.name for p in root.iterdir() if p.is_file()))})"
            )
        try:
            mine = root.joinpath(VARIANTS_DIR, variant, name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return f"{name} is not UTF-8 text"
        if name.endswith(".json"):
            try:
                json.loads(mine)
            except ValueError as exc:
                return f"{name} is not JSON ({exc})"
            continue
        want, have = _fields(orig.read_text(encoding="utf-8")), _fields(mine)
        if have is None:
            return f"{name} has an unmatched brace (write a literal brace as {{{{ or }}}})"
        if want is not None and have != want:
            missing, extra = sorted(want - have), sorted(have - want)
            parts = ([f"lacks {', '.join('{' + f + '}' for f in missing)}"] if missing else []) + (
                [f"has unknown {', '.join('{' + f + '}' for f in extra)}"] if extra else []
            )
            return f"{name} {' and '.join(parts)} (a variant keeps exactly the original's placeholders)"
    return ""


@lru_cache(maxsize=None)
def text(package: str, name: str, variant: str = ORIGINAL) -> str:
    """The prompt file ``name`` (with its extension) of ``package`` as ``variant`` words it: the
    variant folder's copy if it has one, else the original."""
    root = _root(package)
    if root is None:
        raise FileNotFoundError(f"{package} has no prompts folder")
    if variant != ORIGINAL:
        if not NAME.match(variant):
            raise ValueError(f"not a prompt variant name: {variant!r}")
        own = root.joinpath(VARIANTS_DIR, variant, name)
        if own.is_file():
            return own.read_text(encoding="utf-8")
    return root.joinpath(name).read_text(encoding="utf-8")


def overridden(package: str, variant: str) -> list[str]:
    """The prompt files ``variant`` words its own way (the others are the original's)."""
    if variant == ORIGINAL:
        return []
    root = _root(package)
    d = root.joinpath(VARIANTS_DIR, variant) if root is not None else None
    if d is None or not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir() if p.is_file() and p.name != "ABOUT")


def variant_of(config: Any) -> str:
    """The prompt variant a run's config names (``llm.prompt_variant``; ``original`` for a run
    without LLM agents or one written before variants existed)."""
    llm = config.get("llm") if isinstance(config, Mapping) else getattr(config, "llm", None)
    value = llm.get("prompt_variant") if isinstance(llm, dict) else getattr(llm, "prompt_variant", None)
    return value if isinstance(value, str) and value else ORIGINAL
