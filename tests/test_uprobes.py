"""bpftrace's uprobe counts of memcpy's variants: its output parsed, and a real count of a known number of calls."""

from __future__ import annotations

import os
import shutil

import pytest

from conftest import REPO
from perflab import processes, uprobes
from perflab.errors import PerflabError
from perflab.journal import Journal, SystemChanges

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

COPIES = REPO / "tests" / "fixtures" / "uprobes" / "copies.c"
# bpftrace 0.17's -f json output for a program that called one variant (glibc 2.36, Debian 12).
OUTPUT = ('{"type": "attached_probes", "data": {"probes": 28}}\n\n\n'
          '{"type": "map", "data": {"@": {"uprobe:/lib/x86_64-linux-gnu/libc.so.6:__memcpy_avx512_unaligned_erms": '
          '100000, "uprobe:/lib/x86_64-linux-gnu/libc.so.6:__memcpy_sse2_unaligned": 3}}}\n')


def test_the_counts_are_read_per_function_without_the_library():
    assert uprobes.parse_counts(OUTPUT, uprobes.LIBC) == {"__memcpy_avx512_unaligned_erms": 100000,
                                                         "__memcpy_sse2_unaligned": 3}


def test_no_map_means_nothing_was_called():
    assert uprobes.parse_counts('{"type": "attached_probes", "data": {"probes": 28}}\n', uprobes.LIBC) == {}


def test_the_probe_counts_the_started_program_only():
    assert "/pid == cpid/" in uprobes.bpftrace_program(uprobes.LIBC, "__memcpy_*")


def test_an_argument_with_a_space_is_refused(tmp_path):
    with SystemChanges(journal=Journal(path=str(tmp_path / "journal"))) as changes, \
            pytest.raises(PerflabError, match="splits its command on spaces"):
        uprobes.count_calls(["echo", "a b"], changes)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bpftrace") is None or shutil.which("cc") is None
                    or not os.path.exists(uprobes.LIBC), reason="needs root, bpftrace, a C compiler and x86-64 glibc")
def test_a_known_number_of_copies_is_counted_exactly_on_one_variant(tmp_path):
    program = tmp_path / "copies"
    built = processes.run(["cc", "-O2", "-o", str(program), str(COPIES)], timeout=60)
    assert built.returncode == 0, built.stderr
    with SystemChanges(journal=Journal(path=str(tmp_path / "journal"))) as changes:
        baseline = uprobes.count_calls([str(program), "1000", "8"], changes)
        counts = uprobes.count_calls([str(program), "101000", "8"], changes)
    assert len(counts) == 1, f"one variant serves every 8-byte copy: {counts}"
    variant = next(iter(counts))
    assert variant.startswith("__memcpy_") and counts[variant] - baseline.get(variant, 0) == 100000
