"""Lab 6: layout analysis on known assembly, the statistics of the sweep, real sweeps and builds, the seed's talk
replayed, the exercises."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO, run_cli
from perflab.build import ensure_built
from perflab.errors import PerflabError
from perflab.grading import FAILED, INCONCLUSIVE, PASSED, Answers
from perflab.grading.kernel import FunctionAnswer
from perflab.labs.loop_alignment import LAB, builds, layout, notes, recorded
from perflab.labs.loop_alignment import exercises as checks
from perflab.labs.loop_alignment import run as lab
from perflab.labs.loop_alignment.figures import figures, talk_figure
from perflab.probe import Machine
from perflab.sequential import Race
from perflab.verdict import Verdict

pytestmark = pytest.mark.live  # real runs here time this machine: alone, after the tests that run side by side

# objdump -d -w output for a loop whose cmp/jne pair straddles a 64-byte line at 0x1400,
# plus a line objdump (without -w) continues onto the next row.
OBJDUMP = """
build/x:     file format elf64-x86-64

Disassembly of section .text:

00000000000013c0 <checksum>:
    13c0:\t31 c9                \txor    %ecx,%ecx
    13ee:\t48 01 d0             \tadd    %rdx,%rax
    13f1:\t48 83 c2 01          \tadd    $0x1,%rdx
    13f5:\t48 8d 70 03          \tlea    0x3(%rax),%rsi
    13f9:\t48 31 f1             \txor    %rsi,%rcx
    13fc:\t48 39 d7             \tcmp    %rdx,%rdi
    13ff:\t75 ed                \tjne    13ee <checksum+0x2e>
    1401:\t66 66 2e 0f 1f 84 00 \tdata16 cs nopw 0x0(%rax,%rax,1)
    1408:\t00 00 00 00 
    140c:\tc3                   \tret

0000000000001410 <other>:
    1410:\teb fe                \tjmp    1410 <other>
"""


def test_parse_objdump_reads_symbols_bytes_and_continuation_lines():
    functions = layout.parse_objdump(OBJDUMP)
    assert list(functions) == ["checksum", "other"]
    nop = functions["checksum"][-2]
    assert nop.address == 0x1401 and nop.size == 11, "the continued bytes belong to the nopw"
    assert functions["checksum"][-1].text == "ret"
    assert functions["checksum"][6].target() == 0x13EE


def test_find_loop_takes_the_innermost_backward_jump():
    loop = layout.find_loop(layout.parse_objdump(OBJDUMP)["checksum"])
    assert (loop.start, loop.end, loop.size) == (0x13EE, 0x1401, 19)
    assert loop.branch_span() == (0x13FC, 0x1401), "cmp fuses with jne: the pair is the branch"
    assert layout.find_loop(layout.parse_objdump(OBJDUMP)["other"]).size == 2, "a jump to itself is a loop too"


def test_find_loop_without_a_backward_jump_says_why():
    straight = layout.parse_objdump("0000000000001000 <f>:\n    1000:\tc3                   \tret\n")
    with pytest.raises(PerflabError, match="no backward jump"):
        layout.find_loop(straight["f"])


@pytest.mark.parametrize("start,end,block,expected", [
    (0, 64, 64, False), (63, 65, 64, True), (46, 65, 64, True), (14, 19, 32, False), (30, 33, 32, True),
])
def test_crosses_is_about_the_last_byte(start, end, block, expected):
    assert layout.crosses(start, end, block) is expected


def test_boundary_facts_of_known_layouts():
    loop = layout.find_loop(layout.parse_objdump(OBJDUMP)["checksum"])
    facts = layout.boundary_facts(loop)
    assert facts["crosses 64-byte line"] and facts["jump crosses 64-byte line"]
    assert facts["jump crosses or ends on 32-byte boundary"]
    # The same 19 bytes at 0x1400: inside one 32-byte window, but across a 16-byte block.
    moved = layout.Loop(
        tuple(layout.Instruction(i.address - 0x13EE + 0x1400, i.raw, i.text) for i in loop.instructions)
    )
    facts = layout.boundary_facts(moved)
    assert not facts["crosses 64-byte line"] and not facts["crosses 32-byte window"]
    assert not facts["jump crosses or ends on 32-byte boundary"] and facts["crosses 16-byte block"]
    # A jump whose last byte is the last byte of a 32-byte window "ends on" it (JCC erratum).
    ending = layout.Loop((layout.Instruction(0x100D, bytes(17), "add"), layout.Instruction(0x101E, b"\x75\xe0", "jne "
                                                                                                                "100d "
                                                                                                                "<f>")))
    assert layout.boundary_facts(ending)["jump crosses or ends on 32-byte boundary"]


def test_render_lines_marks_the_straddling_instruction_and_the_jump():
    text = layout.render_lines(layout.find_loop(layout.parse_objdump(OBJDUMP)["checksum"]))
    assert "starts at +46" in text and "crosses 64-byte line" in text.splitlines()[0]
    jne = next(line for line in text.splitlines() if "jne" in line)
    assert "* 75 ed" in jne and "<-- crosses a 64-byte line" in jne and "2nd half" in jne


def _timings(fast: float, slow: float, slow_offsets: set[int], flaky: set[int] = frozenset(), n: int = 15):
    data = {}
    for offset in range(32):
        base = slow if offset in slow_offsets else fast
        data[offset] = [base * (1 + 0.002 * ((i * 7 + offset) % 5)) for i in range(n)]
        if offset in flaky:  # slow on 2 visits of 3
            data[offset] = [(fast if i % 3 == 0 else slow) * (1 + 0.002 * (i % 5)) for i in range(n)]
    return data


def test_classify_finds_slow_and_sometimes_slow_offsets():
    found = lab.classify(_timings(0.36, 0.68, {20, 21, 22}, flaky={5}, n=30))
    assert found["slow"] == [20, 21, 22] and found["sometimes_slow"] == [5]
    assert found["fastest"] not in (5, 20, 21, 22) and found["slowest"] in (20, 21, 22)


def test_classify_with_too_few_samples_finds_nothing_significant():
    found = lab.classify(_timings(0.36, 0.68, {20}, n=4))
    assert found["slow"] == [], "four samples cannot pass a Bonferroni-corrected test over 32 offsets"


def test_explain_ranks_the_fact_that_matches_the_slow_offsets_first():
    facts = {o: {"crosses 64-byte line": 20 <= o <= 22, "crosses 16-byte block": o % 2 == 0} for o in range(32)}
    ranked = lab.explain([20, 21, 22], facts)
    assert ranked[0] == {"fact": "crosses 64-byte line", "agree": 32, "of": 32, "share": 1.0}
    assert notes.offset_ranges([46, 47, 48, 110]) == "46-48, 110" and notes.offset_ranges([]) == "none"


def test_pmu_note_says_what_this_machine_can_count():
    class Machine:
        def __init__(self, pmu):
            self.pmu = pmu

        def value(self, name, default=None):
            return self.pmu

    assert "timing only" in notes.pmu_note(Machine(False))
    assert "perf stat -e idq.dsb_uops" in notes.pmu_note(Machine(True))


# --- the seed's talk, replayed ----------------------------------------------------------------------------

def test_the_talk_s_numbers_load_as_the_issue_quotes_them():
    talk = recorded.builds()
    assert list(talk) == [recorded.OLD_BUILD, recorded.SLOW_BUILD, recorded.ALIGNED_BUILD]
    assert (talk["GCC 4.8.5"]["seconds"], talk["GCC 8.5.0"]["seconds"]) == (2.06, 2.65)
    assert "seconds" not in talk["GCC 8.5.0, loop aligned"], "the talk times no aligned build: none is made up"
    assert [b["front_end_bound_percent"] for b in talk.values()] == [[14.4, 14.4], [45.2, 50.3], [15.4, 15.4]]
    assert [b["layout"] for b in talk.values()] == ["aligned", "crosses", "aligned"]


def test_the_replay_gives_the_ratio_and_says_what_one_run_per_build_cannot():
    found = recorded.replay()
    assert found["ratio"] == pytest.approx(2.65 / 2.06)
    assert found["front_end_bound"] == {"GCC 4.8.5": (14.4, 14.4), "GCC 8.5.0": (45.2, 50.3),
                                        "GCC 8.5.0, loop aligned": (15.4, 15.4)}
    said = found["judgement"]
    assert "x1.29" in said and "no interval and no test" in said and "45.2-50.3% for GCC 8.5.0" in said
    assert "mechanism's evidence" in said


def test_the_talk_figure_is_labelled_recorded_and_drawn_where_nothing_was_measured():
    figure = talk_figure()
    assert figure._suptitle.get_text() == "Recorded in the seed's talk, not measured here"
    assert "no interval" in figure.axes[0].get_title()
    assert [title for title, _ in figures(Verdict(LAB.name, "cannot-show", ""))] == ["The seed's talk, replayed"]


def _judged(slowdown: float) -> Verdict:
    """The lab's verdict on a made-up fresh race whose slowest offset takes `slowdown` times the fastest's time."""
    fast = [0.36 + 0.001 * i for i in range(10)]
    raced = Race(["0", "46"], {"0": fast, "46": [t * slowdown for t in fast]}, 0.05)
    return LAB.judge(Machine({}), {
        "params": {"loop": "alu", "cpu": 1}, "notes": [],
        "confirmation": {"fastest": 0, "slowest": 46, "race": raced.to_json()},
        "classification": {"slow": [], "sometimes_slow": []},
        "explanation": [{"fact": "jump crosses 64-byte line", "agree": 0, "of": 128, "share": 0.0}]})


def test_a_run_that_does_not_show_it_is_pointed_to_the_seed_s_numbers():
    assert _judged(1.0).verdict == "not-reproduced" and _judged(1.0).notes[-1] == notes.REPLAYED
    assert _judged(1.5).verdict == "reproduced" and notes.REPLAYED not in _judged(1.5).notes


def test_offset_sweep_rejects_bad_offsets_with_one_line():
    binary = ensure_built(lab.SOURCE_DIR, "offset_sweep")
    for args in (["-o", "120-130"], ["-o", "5-"], ["-l", "fma"], ["-n", "10"]):
        done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and not done.stdout, args


def test_every_copy_is_the_same_bytes_at_its_own_offset():
    layouts = lab.loop_layouts(ensure_built(lab.SOURCE_DIR, "offset_sweep"), "alu")
    assert {o: loop.start % 256 for o, loop in layouts.items()} == {o: o for o in lab.OFFSETS}
    assert len({tuple(i.raw for i in loop.instructions[:-1]) for loop in layouts.values()}) == 1


def test_a_short_real_sweep_measures_every_offset_and_what_it_calls_slow_is_slow():
    """On real samples, without asserting that this host shows the effect (an AMD host may not): every offset is
    timed, and every offset called slow has its median at least MIN_EFFECT above the reference's."""
    settings = lab.Settings(
        iterations=200_000, rounds=12, confirm_rounds=12, confirm_budget_s=10, seed_iterations=1, seed_runs=1
    )
    found = lab.sweep("alu", LAB.choose_cpus(LAB.probe(), None), settings, progress=False)
    classification = found["classification"]
    medians = {int(offset): median for offset, median in classification["medians"].items()}  # JSON-ready keys
    assert set(medians) == set(lab.OFFSETS) and set(found["layouts"]) == {str(o) for o in lab.OFFSETS}
    assert int(classification["fastest"]) not in map(int, classification["slow"])
    limit = medians[int(classification["fastest"])] * (1 + lab.MIN_EFFECT)
    assert all(medians[int(offset)] >= limit for offset in classification["slow"]), classification


def test_seed_builds_skip_a_missing_compiler_with_a_reason():
    built, skipped = builds.seed_builds((builds.Variant("gcc -O2", "gcc", ("-O2",)),
                                         builds.Variant("icx -O2", "no-such-compiler", ("-O2",))))
    assert list(built) == ["gcc -O2"] and "no-such-compiler is not installed" in skipped[0]
    assert builds.function_loop(built["gcc -O2"], "main").branch.is_conditional_jump()


def test_seed_side_by_side_measures_every_build():
    settings = lab.Settings(
        iterations=1, rounds=1, confirm_rounds=1, confirm_budget_s=1, seed_iterations=2_000_000, seed_runs=3
    )
    result = builds.seed_side_by_side(settings=settings, progress=False)
    assert set(result["ns_per_iter"]) == set(result["layouts"]) and builds.SEED_BASELINE in result["ns_per_iter"]
    assert all(len(v) == 3 for v in result["ns_per_iter"].values())
    table = builds.seed_table(result)
    assert "gcc -O2 -falign-loops=64" in table and "1.00x" in table


def test_slow_build_straddles_a_line_and_the_known_fix_does_not():
    slow = checks.exercise_slow_build()
    loop = builds.function_loop(
        builds.build_variant(checks.EXERCISE_SOURCE, slow, checks.EXERCISE_BUILD_DIR), "checksum"
    )
    assert layout.crosses(loop.branch.address, loop.branch.end, layout.LINE)
    fixed = checks.with_fix(slow, checks.KNOWN_FIX)
    loop = builds.function_loop(
        builds.build_variant(checks.EXERCISE_SOURCE, fixed, checks.EXERCISE_BUILD_DIR), "checksum"
    )
    assert loop.start % layout.LINE == 0


def test_exercise_rejects_fixes_that_change_more_than_layout():
    assert checks.not_layout_flags(["-falign-loops=64", "-O3", "-DPADDING=0", "-funroll-loops"]) == [
        "-O3",
        "-funroll-loops",
    ]
    with pytest.raises(PerflabError, match="not a layout flag"):
        checks.try_fix(["-O3"])
    start = builds.function_loop(builds.build_variant(checks.EXERCISE_SOURCE, checks.exercise_slow_build(),
                                                      checks.EXERCISE_BUILD_DIR), "checksum").start % 64
    report = {c.name: c.status for c in checks.slow_build_fix({"FIX_FLAGS": ["-O3"], "LOOP_START_IN_LINE": start})}
    assert report["FIX_FLAGS are layout flags only"] == FAILED
    assert report["where the slow build's loop starts in its 64-byte line"] == PASSED


def test_a_fix_that_moves_nothing_fails_the_boundary_check():
    results = checks.slow_build_fix(
        {"FIX_FLAGS": ["-falign-functions=16"], "CROSSED_BOUNDARY": 64, "LOOP_START_IN_LINE": -1}
    )
    by_name = {c.name: c for c in results}
    assert by_name["the boundary you named: crossed in the slow build, not in your fix"].status == FAILED
    assert "still crosses" in by_name["the boundary you named: crossed in the slow build, not in your fix"].got
    assert by_name["your fix is faster, measured just now"].status in (FAILED, INCONCLUSIVE)


def _talk_answers(drop, crosses) -> Answers:
    inputs = {"my_loop_crosses": checks.fresh_shares()}
    return Answers({"ALIGNMENT_DROP": drop,
                    "my_loop_crosses": FunctionAnswer("__main__", "my_loop_crosses",
                                                      [crosses(*a) for a in inputs["my_loop_crosses"]])},
                   inputs, ["def my_loop_crosses(front_end_bound_percent):\n    pass"])


def test_talk_numbers_checks_the_drop_and_the_layout_on_fresh_shares():
    assert checks.alignment_drop() == pytest.approx((45.2 - 15.4, 50.3 - 15.4))
    right = checks.talk_numbers(_talk_answers((29.8, 34.9), lambda share: share > 30))
    assert [c.status for c in right] == [PASSED, PASSED]
    # against the other compiler's build, and a line drawn among the shares of loops in one line
    wrong = checks.talk_numbers(_talk_answers((45.2 - 14.4, 50.3 - 14.4), lambda share: share > 15))
    assert [c.status for c in wrong] == [FAILED, FAILED]


def test_cli_layout_prints_and_fails_in_one_line():
    done = run_cli("layout", "build/06-loop-alignment/offset_sweep", "alu_loop_46", "--json")
    assert done.returncode == 0, done.stderr
    described = json.loads(done.stdout)
    assert described["start_in_line"] == 46 and described["jump crosses 64-byte line"]
    for args in (
        ["layout", "no/such/binary", "main"],
        ["layout", str(REPO / "build/06-loop-alignment/offset_sweep"), "nosuch"],
    ):
        done = run_cli(*args)
        assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_run_lab_quick_gives_a_verdict_and_saves_one_file(isolated_state):
    verdict = LAB.run(quick=True, progress=False)
    assert verdict.verdict in ("reproduced", "not-reproduced", "inconclusive")
    saved = list((isolated_state / "results" / "loop-alignment").glob("*.json"))
    assert len(saved) == 1 and "confirmation" in json.loads(saved[0].read_text())
    titles = [title for title, _ in figures(verdict)]
    assert len(titles) == 4 and titles[0] == "Time per iteration at each start offset"
