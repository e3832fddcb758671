"""Lab 11's copy_sweep: its samples, and the memcpy it reports, named from glibc's debug symbols and checked
against the uprobe count of the same program."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from perflab import symbols, uprobes
from perflab.build import ensure_built
from perflab.errors import PerflabError
from perflab.journal import Journal, SystemChanges
from perflab.labs import CannotShow
from perflab.labs.memcpy_variant import exercises, recorded, run, variants
from perflab.labs.memcpy_variant.run import uprobe_note
from perflab.labs.memcpy_variant.speedups import arm_key, band, compare, decide, size_text, winners_by_size, wins
from perflab.labs.memcpy_variant.variants import CONTROL, DEFAULT
from perflab.runner import run_records
from perflab.verdict import ALPHA

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

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
    name = symbols.name_at(found["library"], found["offset"], "__memcpy_")
    assert max(counts, key=counts.get) == name
    # -b 1 at 8 B: an untimed block and a timed one, 20,000 copies each; a few more outside the copy loop
    assert 40_000 <= counts[name] <= 40_016, counts


# ---------------------------------------------------------------- the lab: its variants, its judgement

def rounds_of(ns_by_arm: dict[str, dict[int, float]], rounds: int, seed: int = 1,
              noise: float = 0.01) -> dict[str, list[float]]:
    """A race's values: each arm's ns per copy at each size, with 2% of noise a round, the same for every arm
    in a round (what the host does to a round as a whole) times each arm's own `noise`."""
    rng = random.Random(seed)
    values: dict[str, list[float]] = {arm_key(a, s): [] for a, sizes in ns_by_arm.items() for s in sizes}
    for _ in range(rounds):
        level = rng.uniform(0.98, 1.02)
        for arm, sizes in ns_by_arm.items():
            for size, ns in sizes.items():
                values[arm_key(arm, size)].append(ns * level * rng.uniform(1 - noise, 1 + noise))
    return values


SIZES = [8, 16, 32]


def test_a_variant_faster_at_one_size_wins_there_and_nowhere_else():
    same = {8: 4.0, 16: 4.5, 32: 4.0}
    values = rounds_of({DEFAULT: same, CONTROL: same, "ssse3": {8: 4.0, 16: 3.0, 32: 4.1}}, rounds=24)
    comparisons = compare(values, [DEFAULT, CONTROL, "ssse3"], SIZES, ALPHA)
    verdict, shown = decide(comparisons)
    assert verdict == "reproduced" and (shown.arm, shown.size) == ("ssse3", 16)
    assert winners_by_size(comparisons) == {16: ["ssse3"]}
    assert shown.effect.value == pytest.approx(0.5, abs=0.05)


def test_the_same_code_in_every_arm_rules_out_a_win_and_a_noisy_race_decides_nothing():
    same = {8: 4.0, 16: 4.5, 32: 4.0}
    arms = {DEFAULT: same, CONTROL: same, "evex": same}
    assert decide(compare(rounds_of(arms, 24), list(arms), SIZES, ALPHA))[0] == "not-reproduced"
    assert decide(compare(rounds_of(arms, 8, noise=0.3), list(arms), SIZES, ALPHA))[0] == "inconclusive"


def test_a_variant_that_only_beats_an_unlucky_default_does_not_win():
    """The default's own arm ran slow at 16 B; the control, the same code, did not: the rival ties the control."""
    values = rounds_of({DEFAULT: {8: 4.0, 16: 6.0, 32: 4.0}, CONTROL: {8: 4.0, 16: 4.5, 32: 4.0},
                        "sse2": {8: 4.0, 16: 4.5, 32: 4.0}}, rounds=24)
    comparisons = compare(values, [DEFAULT, CONTROL, "sse2"], SIZES, ALPHA)
    assert any(c.verdict == "reproduced" for c in comparisons) and not wins(comparisons)


def test_sizes_join_into_bands():
    assert band([16, 32]) == "16 B to 32 B"
    assert band([1, 4, 8, 1024]) == "1 B, 4 B to 8 B, 1 KiB"
    assert size_text(1 << 20) == "1 MiB" and size_text(48) == "48 B"


def test_the_sources_counts_replay_as_shares_of_each_systems_calls():
    replayed = recorded.replay()
    assert replayed["shares"]["new"]["__memcpy_sse2_unaligned"] == pytest.approx(8025791 / (8025791 + 1224262))
    assert "87% of the counted calls went to __memcpy_sse2_unaligned" in replayed["judgement"]


@pytest.mark.skipif(not HAS_DEBUG_SYMBOLS, reason="needs x86-64 glibc with its debug symbols (libc6-dbg)")
def test_each_mask_is_read_back_and_a_variant_is_raced_once(monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", AWAY_FROM_AVX512)  # the learner's own: it must not move the default
    binary = ensure_built(SOURCE, "copy_sweep")
    found, notes = variants.find_variants(binary)
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert found[0].arm == DEFAULT and found[0].tunables == ""
    assert found[0].function == symbols.name_at(*variants.resolved(binary, ""), "__memcpy_")
    functions = [v.function for v in found if v.arm != CONTROL]
    assert len(functions) == len(set(functions)), "a variant raced twice"
    assert all(v.function.startswith("__memcpy_") for v in found)
    assert all(v.arm == variants.short(v.function) for v in found[2:])


@pytest.mark.parametrize("tunables", ["glibc.malloc.check=3", "glibc.cpu.hwcaps=-AVX512F; rm -rf /",
                                      "glibc.cpu.hwcaps=-AVX512F\nX=1", 42, None, "x" * 400])
def test_the_tune_exercise_takes_only_glibc_cpu_tunables(tunables):
    with pytest.raises(ValueError, match="is not a GLIBC_TUNABLES of glibc.cpu tunables"):
        exercises.valid_tunables(tunables)


def test_the_tune_exercise_takes_the_known_fix_and_none():
    assert exercises.valid_tunables(exercises.KNOWN_FIX) == exercises.KNOWN_FIX
    assert exercises.valid_tunables("glibc.cpu.hwcaps=-AVX512F:glibc.cpu.x86_rep_movsb_threshold=4096")
    assert exercises.valid_tunables("") == ""


def test_without_root_the_default_is_named_and_the_note_says_why_it_was_not_counted(monkeypatch):
    monkeypatch.setattr(variants.os, "geteuid", lambda: 1000)
    skipped = variants.count_default(ensure_built(SOURCE, "copy_sweep"))
    assert skipped == {"skipped": "uprobes need root: run the lab with sudo to count the calls as the source did"}
    assert "uprobes did not count: uprobes need root" in uprobe_note(skipped)
    assert uprobe_note({"counts": {"__memcpy_ssse3": 40003}}) == " (uprobes counted 40,003 calls of __memcpy_ssse3)"


def test_a_glibc_with_one_variant_cannot_show_it(monkeypatch):
    only = [variants.Variant(DEFAULT, "__memcpy_sse2_unaligned", ""),
            variants.Variant(CONTROL, "__memcpy_sse2_unaligned", variants.CONTROL_TUNABLES)]
    monkeypatch.setattr(run, "find_variants", lambda binary: (only, []))
    with pytest.raises(CannotShow, match="every mask gave this glibc's default, __memcpy_sse2_unaligned"):
        run.LAB.measure(run.LAB.probe(), 1, run.LAB.QUICK, False)
