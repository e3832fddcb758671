"""Lab 4's guests and what they print: a boot of one paging mode, read into its samples.

Two kinds of guest count the same fault program (labs/04-page-table-levels/faults.c) under the same emulated
CPU and clock (the icount profiles):
- the Debian guest (the full run): the course's guest image with its agent, which runs the program (the static
  build the quick guests run, given through the VM's exchange folder), then faults in a mapping hinted above
  2^47 and times handle_mm_fault with funclatency; both modes at once;
- the minimal guest (the quick run, minimal.py): the same kernel with an initramfs of init and a static build
  of the program, booted with nokaslr, both modes at once.
Both print the kernel's VmallocTotal line, the program's JSON lines and the same marks, read by read_boot.
"""

from __future__ import annotations

import io
import json
import shutil
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from ...build import ensure_built
from ...errors import PerflabError
from ...journal import signals_end_the_process
from ...probe import paging_levels_of
from .. import CannotShow
from .faults import MODES, SOURCE_DIR, Settings, faults_argv, parse_histogram

PROFILES = {5: "la57-icount", 4: "no5lvl-icount"}  # paging levels -> the VM profile that boots with them
# Built static on the host, as for the quick guests: compiled in the guest, it cost every round about 5 s of
# emulation here (and a dynamic build would have to match the guest's libc). Given through the exchange folder,
# run from tmpfs, where the guest's own build used to be, so that its pages come from memory, not over 9p.
GIVEN_BINARY, GUEST_BINARY = "/exchange/faults", "/tmp/faults"
TRACED = "handle_mm_fault"
TRACE_MARK = f"== funclatency {TRACED}"
HIGH_MARK = "== faults -H"  # init.c prints it too
FAILED_MARK = "== failed"  # init.c's line for a program that did not exit 0


def check_vm_ready() -> None:
    """QEMU and the guest image are there: otherwise CannotShow, with one line that says how to get them."""
    from ...vm.qemu import cannot_boot

    if cannot_boot():
        raise CannotShow(cannot_boot())


def guest_script(settings: Settings, histogram: bool = False, high: bool = False) -> str:
    """Say the paging mode, measure both modes with the program in the exchange folder; then, if asked, the
    rounds hinted above 2^47 and the histogram, each after its mark, so the measured rounds stay free of both."""
    runs = " && ".join(" ".join(faults_argv(GUEST_BINARY, mode, settings)) for mode in MODES)
    script = f"cp {GIVEN_BINARY} {GUEST_BINARY} && grep VmallocTotal /proc/meminfo && {runs}"
    if high:
        script += f" && echo '{HIGH_MARK}' && {' '.join(faults_argv(GUEST_BINARY, 'anon', settings))} -H"
    return f"{script} && {histogram_script(GUEST_BINARY, settings)}" if histogram else script


# ANCHOR: histogram_script
def histogram_script(binary: str, settings: Settings) -> str:
    """One more round of anonymous faults while bcc's funclatency times every handle_mm_fault call.

    After the measured rounds, so the probe's own instructions are in none of them. funclatency is the
    libbpf-tools build: compiled once, it attaches in seconds under TCG, where bcc's Python tool would compile
    its probe for minutes. A tool that cannot attach (no kprobes) leaves its error after the mark, not a failure.
    """
    faults = " ".join(faults_argv(binary, "anon", settings))
    return (f"(stdbuf -oL funclatency {TRACED} > /tmp/funclatency.txt 2>&1 & tracer=$!; "
            "until grep -q Tracing /tmp/funclatency.txt || ! kill -0 $tracer 2>/dev/null; do sleep 0.2; done; "
            f"{faults} > /dev/null; kill -INT $tracer 2>/dev/null; wait $tracer; "
            f"echo '{TRACE_MARK}'; cat /tmp/funclatency.txt)")
# ANCHOR_END: histogram_script


def split_guest_output(text: str) -> tuple[str, str, str | None]:
    """The guest's output in its parts: the measured rounds, the rounds hinted above 2^47 ("" if not run), and
    funclatency's output (None without its mark)."""
    measured, marked, traced = text.partition(TRACE_MARK)
    measured, _, hinted_high = measured.partition(HIGH_MARK)
    return measured, hinted_high, traced if marked else None


def parse_guest_output(text: str) -> tuple[int | None, list[dict[str, Any]]]:
    """The guest's paging levels (from its VmallocTotal line) and the program's samples."""
    levels, samples = None, []
    for line in text.splitlines():
        if line.startswith("VmallocTotal"):
            levels = paging_levels_of(line)
        elif line.startswith("{"):
            record = json.loads(line)
            if record.get("type") == "sample":
                samples.append(record)
    return levels, samples


def read_boot(levels: int, output: str, histogram: bool = False, high: bool = False) -> dict[str, Any]:
    """What a boot of `levels` printed: its samples, and the rounds hinted high and the histogram if asked for.
    PerflabError when the guest ran another paging mode or a program in it failed."""
    profile = PROFILES[levels]
    failed = [line for line in output.splitlines() if line.startswith(FAILED_MARK)]
    if failed:
        raise PerflabError(f"the fault benchmark failed in {profile}: {failed[0]}")
    measured, hinted_high, traced = split_guest_output(output)
    found, samples = parse_guest_output(measured)
    if found != levels:
        raise PerflabError(f"{profile} booted with {found}-level page tables, not {levels}: check vm/{profile}.toml "
                           "(la57, kernel_args) and the guest kernel")
    boot: dict[str, Any] = {"profile": profile, "paging_levels": found, "samples": samples}
    if high:
        boot["hinted_high"] = parse_guest_output(hinted_high)[1]
    if histogram:
        boot[TRACED] = parse_histogram(traced) if traced is not None else {"error": "the guest printed no histogram"}
    return boot


def boot_both(settings: Settings, histogram: bool = False, high: bool = False) -> dict[int, dict[str, Any]]:
    """Boot the Debian guest of each paging mode side by side, measure, stop both: levels -> its boot. Each has
    one vCPU, which icount runs on one host thread, so two host CPUs run both in about the time of one, and the
    instructions each counts do not depend on what else the host runs. When one fails, or on Ctrl-C, the other
    stops at once."""
    from ...vm import image as guest_image

    guest_image.ensure(progress=False)  # here, not in both threads at once
    program = static_build()  # likewise: two makes of one file at once would race
    stop = threading.Event()
    # SIGTERM too sets `stop`: the threads' sessions stop their VMs, which only the main thread hears of.
    with signals_end_the_process(), ThreadPoolExecutor(len(PROFILES), thread_name_prefix="perflab-guest") as pool:
        booting = {levels: pool.submit(boot_and_measure, levels, settings, program, histogram, high, stop)
                   for levels in PROFILES}
        try:
            for boot in wait(booting.values(), return_when=FIRST_EXCEPTION).done:
                boot.result()  # the first failure, while the other boot may still run
            return {levels: boot.result() for levels, boot in booting.items()}
        finally:
            stop.set()


def static_build() -> Path:
    """The fault program built static (labs/04-page-table-levels: `make guest`), which both kinds of guest run."""
    return ensure_built(SOURCE_DIR, "guest/faults", target="guest")


def boot_and_measure(levels: int, settings: Settings, program: Path, histogram: bool = False, high: bool = False,
                     stop: threading.Event | None = None) -> dict[str, Any]:
    """Boot the Debian guest of the profile for `levels`, measure with `program` (static_build), stop the VM:
    the boot, read. stop: set by another thread, it ends the boot or the measurement at once."""
    from ...vm.boot import session
    from ...vm.commands import execute
    from ...vm.labrun import vm_block

    profile = PROFILES[levels]
    out, err = io.BytesIO(), io.BytesIO()
    with session(profile, progress=False, stop=stop) as machine:
        shutil.copy(program, machine.exchange / Path(GIVEN_BINARY).name)
        code = execute(machine, ["sh", "-c", guest_script(settings, histogram, high)], stdout=out, stderr=err,
                       stop=stop)
        vm = vm_block(machine.info())
    if code != 0:
        last = err.getvalue().decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {code}"]
        raise PerflabError(f"the fault benchmark failed in {profile}: {last[0]}")
    boot = read_boot(levels, out.getvalue().decode(errors="replace"), histogram, high)
    return {**boot, "guest": "debian", "boot_seconds": vm.get("boot_seconds"), "accel": vm.get("accel"),
            "icount": "-icount" in (vm.get("qemu_argv") or [])}
