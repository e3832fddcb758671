"""The labs' own subcommands (`perflab c2c`, `perflab layout`): found in the lab packages labs/manifest.toml lists.

A lab declares tools in perflab/labs/NAME/cli.py (the lab contract in perflab/labs/__init__.py says how). The
file is loaded by its path, so that neither perflab/labs/__init__.py nor the lab's own package is imported
(numpy, the probe, the lab's class: a third of a second on every `perflab` command, `--help` included); it
imports the lab's modules inside its handlers.
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

from ..errors import PerflabError
from ..paths import LAB_PACKAGES, LABS_DIR, lab_package

MANIFEST = LABS_DIR / "manifest.toml"


class LabCommands:
    """What a lab's add_commands(commands) is given: `add_parser` as argparse's subparsers have it (help=,
    description=, examples=, ...), keeping each command's help line to list under its lab in `perflab --help`."""

    def __init__(self, commands):
        self._commands = commands
        self.listed: list[tuple[str, str]] = []

    def add_parser(self, name: str, *, help: str, **kwargs):
        self.listed.append((name, help))
        return self._commands.add_parser(name, **kwargs)  # no help=: listed under its lab, not among the commands


def ready_labs(manifest: Path = MANIFEST) -> list[tuple[int, str]]:
    """(number, name) of every ready lab in the manifest, in course order.

    Read here with tomllib rather than by perflab/manifest/labs.py, whose dataclasses and checks cost every
    `perflab` command 10 ms more (53 against 64 ms for `perflab --help` here); that reader checks the same file
    whenever a lab runs, and tests/test_lab_contract.py that both agree.
    """
    try:
        tables = tomllib.loads(manifest.read_text())["lab"]
        return [(table["number"], table["name"]) for table in tables if table["status"] == "ready"]
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as err:
        raise PerflabError(f"cannot read the lab manifest {manifest}: {err!r}; restore it from git") from None


def tool_module_path(name: str) -> Path:
    """Where the lab named `name` declares its tools, if it has any."""
    return LAB_PACKAGES / lab_package(name) / "cli.py"


def load_tool_module(path: Path):
    """The module at `path`, loaded alone: no package of its is imported, so it may not import relatively."""
    spec = importlib.util.spec_from_file_location(f"perflab_lab_tools_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def add_lab_tools(commands) -> str:
    """Add every lab's tools to `commands`; return the section of `perflab --help` that lists them by lab."""
    lines = ["lab tools (each declared by its lab, in perflab/labs/NAME/cli.py):"]
    for number, name in ready_labs():
        path = tool_module_path(name)
        if not path.is_file():
            continue
        lab_commands = LabCommands(commands)
        load_tool_module(path).add_commands(lab_commands)
        lines.append(f"  lab {number}, {name}:")
        lines += [f"    {command:<9} {help}" for command, help in lab_commands.listed]  # as argparse lists commands
    return "\n".join(lines)
