"""What only the running machine can tell (CPUID, a hardware cycles event, our privileges), or its recording.

On the live machine it is measured (`measure_live`); in a fixture tree it comes from `perflab-live.json` at the
fixture's root, which has the same shape (`tests/fixtures/make_machines.py capture` writes it).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import struct

from .. import cpuid
from ..sysfs import SysRoot
from .facts import SCHEMA

LIVE_FILE = "perflab-live.json"

# perf_event_open(2) syscall numbers; the libc has no wrapper.
PERF_EVENT_OPEN_NR = {"x86_64": 298, "aarch64": 241, "riscv64": 241}
PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_ATTR_SIZE_VER0 = 64
PERF_FLAG_FD_CLOEXEC = 8


def open_cycles_event() -> dict:
    """Try perf_event_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES) on ourselves, then close it.

    Only user-space counting is requested (exclude_kernel, exclude_hv), so a
    perf_event_paranoid of 2 does not make a working PMU look absent.
    Returns {"ok": bool | None, "errno": int | None, "error": str | None}.
    """
    machine = os.uname().machine
    nr = PERF_EVENT_OPEN_NR.get(machine)
    if nr is None:
        return {"ok": None, "errno": None, "error": f"perf_event_open syscall number unknown on {machine}"}
    attr = ctypes.create_string_buffer(PERF_ATTR_SIZE_VER0)
    struct.pack_into("=IIQ", attr, 0, PERF_TYPE_HARDWARE, PERF_ATTR_SIZE_VER0, PERF_COUNT_HW_CPU_CYCLES)
    disabled, exclude_kernel, exclude_hv = 1 << 0, 1 << 5, 1 << 6
    struct.pack_into("=Q", attr, 40, disabled | exclude_kernel | exclude_hv)  # the flags bitfield
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(
        ctypes.c_long(nr),
        attr,
        ctypes.c_int(0),
        ctypes.c_int(-1),
        ctypes.c_int(-1),
        ctypes.c_ulong(PERF_FLAG_FD_CLOEXEC),
    )
    if fd >= 0:
        os.close(fd)
        return {"ok": True, "errno": None, "error": None}
    err = ctypes.get_errno()
    return {"ok": False, "errno": err, "error": f"{errno.errorcode.get(err, err)}: {os.strerror(err)}"}


def measure_live(root: SysRoot) -> dict:
    """What only the running machine can tell; the shape of perflab-live.json."""
    raw, why = cpuid.read_cpuid_or_reason()
    status = root.read("/proc/self/status") or ""
    cap_eff = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status, re.M)
    return {
        "schema": SCHEMA,
        "machine": os.uname().machine,
        "cpuid": raw,
        "cpuid_note": why,
        "perf_cycles": open_cycles_event(),
        "euid": os.geteuid(),
        "cap_eff": cap_eff.group(1) if cap_eff else None,
    }


def live_inputs(root: SysRoot) -> tuple[dict, str]:
    """(the live measurements, the suffix to put on their sources)."""
    if root.is_live:
        return measure_live(root), ""
    text = root.read("/" + LIVE_FILE)
    if text is None:
        return {"missing": f"{root.path('/' + LIVE_FILE)} is missing"}, f" (from {LIVE_FILE})"
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {"missing": f"{root.path('/' + LIVE_FILE)} is not a JSON object"}, f" (from {LIVE_FILE})"
    return data, f" (recorded in {LIVE_FILE})"

