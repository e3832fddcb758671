"""Lab 11's copy_sweep: its samples, and the memcpy it reports, named from glibc's debug symbols and checked
against the uprobe count of the same program."""

from __future__ import annotations

import os
import shutil

import pytest

from perflab import symbols, uprobes
from perflab.build import ensure_built
from perflab.errors import PerflabError
from perflab.journal import Journal, SystemChanges
from perflab.runner import run_records

SOURCE = "labs/11-memcpy-variant"
# The masks that moved glibc 2.36 off its default on an AVX-512 Intel guest; elsewhere it may stay.
AWAY_FROM_AVX512 = "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX_Fast_Unaligned_Load,-Fast_Unaligned_Copy"
NM = ("000000000016d800 t __memcpy_avx512_unaligned_erms\n000000000016d800 t __memmove_avx512_unaligned_erms\n"
      "0000000000028000 T memcpy\n0000000000000000 a some.c\n0000000000200000 d some_data\n")
HAS_DEBUG_SYMBOLS = os.path.exists(uprobes.LIBC) and symbols.DEBUG_ROOT.is_dir()


def test_nm_gives_every_name_of_a_function_by_offset_and_nothing_but_functions():
    assert symbols.parse_nm(NM) == {0x16d800: ["__memcpy_avx512_unaligned_erms", "__memmove_avx512_unaligned_erms"],
                                    0x28000: ["memcpy"]}


def sweep(*argv: str, tunables: str = "") -> list[dict]:
    binary = ensure_built(SOURCE, "copy_sweep")
    env = ["env", f"GLIBC_TUNABLES={tunables}"] if tunables else []
    return run_records([*env, str(binary), *argv])


def test_one_sample_per_size_asked_for_with_a_positive_time():
    records = sweep("-s", "1,8,4K,1M", "-b", "1")
    samples = [r for r in records if r["type"] == "sample"]
    assert [s["size"] for s in samples] == [1, 8, 4096, 1 << 20] and all(s["ns_per_copy"] > 0 for s in samples)
    assert next(r for r in records if r["type"] == "memcpy")["library"].endswith("libc.so.6")


def test_a_size_out_of_range_is_one_line_and_exit_2():
    binary = ensure_built(SOURCE, "copy_sweep")
    with pytest.raises(PerflabError, match="give 1 byte to 1M"):
        run_records([str(binary), "-s", "2M"])


@pytest.mark.skipif(not HAS_DEBUG_SYMBOLS, reason="needs x86-64 glibc with its debug symbols (libc6-dbg)")
def test_the_reported_memcpy_is_a_variant_and_a_mask_can_move_it():
    def variant(tunables: str = "") -> str:
        found = next(r for r in sweep("-s", "8", "-b", "1", tunables=tunables) if r["type"] == "memcpy")
        return symbols.name_at(found["library"], found["offset"], "__memcpy_")

    default, masked = variant(), variant(AWAY_FROM_AVX512)
    assert default.startswith("__memcpy_") and masked.startswith("__memcpy_")
    assert "avx512" not in masked, "the mask took AVX-512 away"


@pytest.mark.skipif(not HAS_DEBUG_SYMBOLS or os.geteuid() != 0 or shutil.which("bpftrace") is None,
                    reason="needs root, bpftrace and glibc's debug symbols")
def test_the_symbol_of_the_resolved_address_is_the_variant_the_uprobes_count(tmp_path):
    binary = ensure_built(SOURCE, "copy_sweep")
    found = next(r for r in sweep("-s", "8", "-b", "1") if r["type"] == "memcpy")
    with SystemChanges(journal=Journal(path=str(tmp_path / "journal"))) as changes:
        counts = uprobes.count_calls([str(binary), "-s", "8", "-b", "1"], changes)
    assert max(counts, key=counts.get) == symbols.name_at(found["library"], found["offset"], "__memcpy_")
