"""Lab 11: which memcpy each GLIBC_TUNABLES mask gives this program, read back, never assumed.

glibc's IFUNC resolver picks memcpy's variant from the CPU's features when a program loads;
`glibc.cpu.hwcaps=-FEATURE,...` hides features from it. Which variant a mask gives depends on the CPU
and on the glibc, so every candidate mask is tried: copy_sweep reports the address its memcpy resolved
to, glibc's debug symbols name it, and masks that land on a variant already found are dropped. The
default (no tunables) is also counted with bpftrace's uprobes where they work, the way the source found
it with funccount.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ... import symbols, uprobes
from ...errors import PerflabError
from ...journal import SystemChanges
from ...runner import run_records

SOURCE_DIR = "labs/11-memcpy-variant"
DEFAULT = "default"
CONTROL = "control"
# A mask glibc 2.36 ignores (the hwcaps name is AVX2, not AVX2_Usable): the default's own code, run under a
# tunable, to show how far two arms of the same code differ. Kept only where it reads back as the default.
CONTROL_TUNABLES = "glibc.cpu.hwcaps=-AVX2_Usable"
# Features hidden from the resolver, from most to fewest kept: on an AVX-512 Intel core with glibc 2.36 they
# give evex, avx, avx without rep movsb, sse2, sse2 without rep movsb and ssse3 (README.md's table).
NO_AVX512 = "-AVX512F,-AVX512VL"
SSE_ONLY = f"{NO_AVX512},-AVX_Fast_Unaligned_Load"
MASKS = ("-AVX512F", NO_AVX512, f"{NO_AVX512},-ERMS", SSE_ONLY, f"{SSE_ONLY},-ERMS",
         f"{SSE_ONLY},-Fast_Unaligned_Copy")


@dataclass(frozen=True)
class Variant:
    """One arm of the race: a memcpy variant and the GLIBC_TUNABLES that give it ("" for the default)."""

    arm: str  # "default", "control", or the variant's short name ("ssse3")
    function: str  # glibc's name, "__memcpy_ssse3", or "libc+0x1a2b3" without debug symbols
    tunables: str


def tunables_of(mask: str) -> str:
    return f"glibc.cpu.hwcaps={mask}"


def argv_under(tunables: str, argv: list[str]) -> list[str]:
    """argv under exactly these tunables: a GLIBC_TUNABLES of the learner's own must not move the default."""
    return ["env", "-u", "GLIBC_TUNABLES", *([f"GLIBC_TUNABLES={tunables}"] if tunables else []), *argv]


def resolved(binary: Path, tunables: str) -> tuple[str, int]:
    """(library, offset) of the memcpy copy_sweep got under these tunables."""
    records = run_records(argv_under(tunables, [str(binary), "-s", "1", "-b", "1"]))
    found = next((r for r in records if r.get("type") == "memcpy"), None)
    if found is None:
        raise PerflabError(f"{binary.name} did not say where its memcpy resolved")
    return found["library"], found["offset"]


def function_name(library: str, offset: int) -> str:
    """glibc's name for the variant at `offset`, or its address where the debug symbols are missing."""
    try:
        return symbols.name_at(library, offset, "__memcpy_")
    except PerflabError:
        return f"libc+{offset:#x}"


def short(function: str) -> str:
    """__memcpy_avx512_unaligned_erms -> avx512_unaligned_erms."""
    return function.removeprefix("__memcpy_")


# ANCHOR: find
def find_variants(binary: Path) -> tuple[list[Variant], list[str]]:
    """The default, the control where it reads back as the default, and one arm per other variant the masks
    reach, in MASKS' order; and notes on what was dropped."""
    library, default_offset = resolved(binary, "")
    default = Variant(DEFAULT, function_name(library, default_offset), "")
    kept, notes, seen = [default], [], {default_offset: default}
    control_offset = resolved(binary, CONTROL_TUNABLES)[1]
    if control_offset == default_offset:
        kept.append(Variant(CONTROL, default.function, CONTROL_TUNABLES))
    else:
        notes.append(f"no control: this glibc does not ignore {CONTROL_TUNABLES}")
    for mask in MASKS:
        offset = resolved(binary, tunables_of(mask))[1]
        if offset in seen:
            notes.append(f"{tunables_of(mask)} gives {short(seen[offset].function)} again: not raced")
            continue
        seen[offset] = Variant(short(function_name(library, offset)), function_name(library, offset),
                               tunables_of(mask))
        kept.append(seen[offset])
    if default.function.startswith("libc+"):
        notes.append(f"the variants are named by their address in {library}: its debug symbols are missing "
                     "(Debian: apt install libc6-dbg)")
    return kept, notes


# ANCHOR_END: find


def count_default(binary: Path, copies_of: int = 8) -> dict[str, Any]:
    """The default's calls counted per variant with bpftrace's uprobes, as the source counted them with
    funccount: {"counts": {function: calls}} or {"skipped": why}."""
    if os.geteuid() != 0:
        return {"skipped": "uprobes need root: run the lab with sudo to count the calls as the source did"}
    try:
        with SystemChanges() as changes:
            counts = uprobes.count_calls([str(binary), "-s", str(copies_of), "-b", "1"], changes,
                                         env={k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"})
    except PerflabError as why:
        return {"skipped": str(why)}
    return {"counts": counts}


def to_json(variants: list[Variant]) -> list[dict[str, str]]:
    return [asdict(v) for v in variants]


def from_json(data: list[dict[str, str]]) -> list[Variant]:
    return [Variant(**v) for v in data]
