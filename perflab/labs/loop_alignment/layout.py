"""Where a loop's bytes sit: objdump's disassembly, the loop in it, the boundaries it crosses.

The front end fetches instructions in aligned blocks: 16 bytes for the legacy
decoders, 32-byte windows in the decoded-uop cache (DSB), 64-byte lines in
the instruction cache. A loop that straddles one of those boundaries needs
one more block per iteration, and on Skylake-derived cores with the JCC
erratum microcode a jump that crosses or ends on a 32-byte boundary is kept
out of the uop cache altogether. These functions read the real bytes with
objdump (binutils) and say which of those cases a loop is in.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ... import processes
from ...errors import PerflabError

LINE = 64  # instruction-cache line
WINDOW = 32  # decoded-uop cache window
FETCH = 16  # legacy decode fetch block

# Instructions that macro-fuse with a following conditional jump on Intel cores
# (with or without an AT&T size suffix): the JCC erratum then applies to the pair.
_FUSING = re.compile(r"(cmp|test|add|sub|and|inc|dec)[bwlq]?")

_SYMBOL = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_INSTRUCTION = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*(?:\t(.*))?$")
_TARGET = re.compile(r"^\s*([0-9a-f]+)\b")


@dataclass(frozen=True)
class Instruction:
    address: int
    raw: bytes
    text: str

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def end(self) -> int:
        return self.address + self.size

    @property
    def mnemonic(self) -> str:
        return self.text.split()[0] if self.text else ""

    def is_jump(self) -> bool:
        return self.mnemonic.startswith("j")

    def is_conditional_jump(self) -> bool:
        return self.is_jump() and self.mnemonic != "jmp"

    def target(self) -> int | None:
        """The address a direct jump goes to (objdump prints it first in the operands)."""
        if not self.is_jump() or len(self.text.split(None, 1)) < 2:
            return None
        found = _TARGET.match(self.text.split(None, 1)[1])
        return int(found.group(1), 16) if found else None


# ANCHOR: parse
def parse_objdump(text: str) -> dict[str, list[Instruction]]:
    """Instructions by symbol, from `objdump -d -w` output.

    Lines that continue an instruction's bytes (objdump without -w) are merged
    into the instruction they belong to.
    """
    functions: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for line in text.splitlines():
        symbol = _SYMBOL.match(line)
        if symbol:
            current = functions.setdefault(symbol.group(2), [])
            continue
        found = _INSTRUCTION.match(line)
        if current is None or not found:
            continue
        address, raw, text_part = int(found.group(1), 16), bytes.fromhex(found.group(2)), (found.group(3) or "").strip()
        if not text_part and current and current[-1].end == address:
            previous = current.pop()
            current.append(Instruction(previous.address, previous.raw + raw, previous.text))
        else:
            current.append(Instruction(address, raw, " ".join(text_part.split())))
    return functions
# ANCHOR_END: parse


def disassemble(binary: Path, symbols: list[str] | None = None) -> dict[str, list[Instruction]]:
    """Run objdump on a binary (or just some of its symbols) and parse the result."""
    if shutil.which("objdump") is None:
        raise PerflabError("objdump is missing: run `make lab` (it installs binutils)")
    argv = ["objdump", "-d", "-w"]
    if symbols and len(symbols) == 1:
        argv.append(f"--disassemble={symbols[0]}")
    done = processes.run(argv + [str(binary)])
    if done.returncode != 0:
        raise PerflabError(f"objdump failed on {binary}: {done.stderr.strip()}")
    functions = parse_objdump(done.stdout)
    if symbols:
        missing = [s for s in symbols if s not in functions]
        if missing:
            raise PerflabError(f"{binary} has no function {missing[0]}: was it inlined? build it with noinline")
        functions = {s: functions[s] for s in symbols}
    return functions


@dataclass(frozen=True)
class Loop:
    """The bytes from a loop's top to the end of the jump that closes it."""

    instructions: tuple[Instruction, ...]

    @property
    def start(self) -> int:
        return self.instructions[0].address

    @property
    def end(self) -> int:
        return self.instructions[-1].end

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def branch(self) -> Instruction:
        return self.instructions[-1]

    def branch_span(self) -> tuple[int, int]:
        """Bytes of the closing jump, with the instruction fused to it when there is one."""
        branch = self.branch
        if (
            len(self.instructions) > 1
            and _FUSING.fullmatch(self.instructions[-2].mnemonic)
            and branch.is_conditional_jump()
        ):
            return self.instructions[-2].address, branch.end
        return branch.address, branch.end


def find_loop(instructions: list[Instruction]) -> Loop:
    """The innermost loop: the shortest backward jump and the instructions it repeats."""
    backward = [i for i in instructions if i.is_jump() and i.target() is not None and i.target() <= i.address]
    if not backward:
        raise PerflabError("no loop found: the function has no backward jump (was the loop unrolled away?)")
    branch = min(backward, key=lambda i: i.end - i.target())
    body = tuple(i for i in instructions if branch.target() <= i.address <= branch.address)
    if not body or body[0].address != branch.target():
        raise PerflabError(f"the backward jump at {branch.address:#x} lands inside an instruction: not a loop objdump "
                           "can show")
    return Loop(body)


# ANCHOR: boundaries
def crosses(start: int, end: int, block: int) -> bool:
    """Do the bytes [start, end) span more than one aligned block of `block` bytes?"""
    return start // block != (end - 1) // block


def ends_on(end: int, block: int) -> bool:
    """Does a range end exactly at a block boundary (its last byte is a block's last byte)?"""
    return end % block == 0


def boundary_facts(loop: Loop) -> dict[str, bool]:
    """The layout facts that can slow a loop, each true or false for this one."""
    branch_start, branch_end = loop.branch_span()
    return {
        "crosses 64-byte line": crosses(loop.start, loop.end, LINE),
        "jump crosses 64-byte line": crosses(branch_start, branch_end, LINE),
        "crosses 32-byte window": crosses(loop.start, loop.end, WINDOW),
        "jump crosses or ends on 32-byte boundary": crosses(branch_start, branch_end, WINDOW)
        or ends_on(branch_end, WINDOW),
        "crosses 16-byte block": crosses(loop.start, loop.end, FETCH),
    }
# ANCHOR_END: boundaries


def describe(loop: Loop) -> dict:
    """A loop's layout as plain data, for results files and tables."""
    return {
        "start": loop.start, "end": loop.end, "size": loop.size,
        "start_in_line": loop.start % LINE, "branch": list(loop.branch_span()),
        "instructions": [{"address": i.address, "bytes": i.raw.hex(" "), "text": i.text} for i in loop.instructions],
        **boundary_facts(loop),
    }


# ANCHOR: render
def render_lines(loop: Loop) -> str:
    """The loop's instructions laid out on 64-byte lines, 32-byte halves marked, like a hand-drawn table.

    Each row is one instruction: its line, which half of the line, its offset
    in the line, its bytes and its text. `<-- crosses` marks an instruction
    whose bytes straddle a 32- or 64-byte boundary; `*` marks the closing jump.
    """
    rows = []
    branch_start, _ = loop.branch_span()
    for i in loop.instructions:
        line = i.address - i.address % LINE
        half = "1st half" if i.address % LINE < WINDOW else "2nd half"
        mark = ""
        if crosses(i.address, i.end, LINE):
            mark = "<-- crosses a 64-byte line"
        elif crosses(i.address, i.end, WINDOW):
            mark = "<-- crosses a 32-byte window"
        branch = "*" if i.address >= branch_start else " "
        rows.append(
            f"{line:#010x}  {half}  +{i.address % LINE:2d} {branch} {i.raw.hex(' '):<24} {i.text:<32} {mark}".rstrip()
        )
    facts = boundary_facts(loop)
    summary = ", ".join(name for name, true in facts.items() if true) or "inside one 16-byte block"
    header = (
        f"loop {loop.start:#x}-{loop.end:#x}: {loop.size} bytes, starts at +{loop.start % LINE} in its line; {summary}"
    )
    return "\n".join([header, "line        half      off   bytes                    instruction"] + rows)
# ANCHOR_END: render
