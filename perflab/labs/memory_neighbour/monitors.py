"""What can watch the memory controller here: resctrl's bandwidth monitoring, the uncore's memory-controller
counters, or neither.

- resctrl (Intel RDT's MBM, AMD's PQoS): where /sys/fs/resctrl is mounted and info/L3_MON/mon_features lists
  mbm_total_bytes, the default group's mon_data/mon_L3_*/mbm_total_bytes count the bytes that every task not in
  another group moved between the L3 and memory. The lab reads them before and after each period: reading
  changes nothing, so no group is made (that would be a system change; `perflab system show` lists none).
- the uncore: a memory-controller PMU in /sys/bus/event_source/devices (uncore_imc_N on Intel servers,
  uncore_imc on Intel clients, amd_umc_N on AMD's Zen 4 and later) counts the controller's commands,
  machine-wide; `perf stat -a` reads it as root. The lab names the command, with the traffic events the
  kernel lists for that PMU; it does not run it, so the victim's timings never include perf's own work.
- neither, in most VMs (this one): the lab says so and counts the neighbour's own bytes instead.
"""

from __future__ import annotations

from typing import Any

from ...sysfs import SysRoot, default_root

RESCTRL = "/sys/fs/resctrl"
PMU_DIR = "/sys/bus/event_source/devices"
UNCORE = ("uncore_imc", "amd_umc")  # the memory controllers' PMUs, Intel's and AMD's
# Events in a PMU's sysfs events/ folder that count the controller's traffic: CAS commands (64 bytes each on
# Intel servers) or, on Intel clients, data reads and writes (named both ways across generations).
TRAFFIC = ("cas_count_read", "cas_count_write", "data_reads", "data_writes", "data_read", "data_write")


def mbm_files(root: SysRoot | None = None) -> list[str]:
    """The default group's mbm_total_bytes, one per L3 domain; [] where resctrl has no bandwidth monitoring."""
    root = root or default_root()
    features = (root.read(f"{RESCTRL}/info/L3_MON/mon_features") or "").split()
    if "mbm_total_bytes" not in features:
        return []
    return [f"{RESCTRL}/mon_data/{domain}/mbm_total_bytes"
            for domain in sorted(root.listdir(f"{RESCTRL}/mon_data")) if domain.startswith("mon_L3_")]


def read_mbm(files: list[str], root: SysRoot | None = None) -> int | None:
    """The bytes counted so far, summed over the L3 domains; None if one is unreadable ("Unavailable")."""
    root = root or default_root()
    total = 0
    for path in files:
        value = root.read_int(path)
        if value is None:
            return None
        total += value
    return total


def uncore_pmus(root: SysRoot | None = None) -> dict[str, list[str]]:
    """{family: [PMU, ...]} of the memory-controller PMUs the kernel shows."""
    root = root or default_root()
    found: dict[str, list[str]] = {}
    for name in sorted(root.listdir(PMU_DIR)):
        family = next((f for f in UNCORE if name == f or name.startswith(f"{f}_")), None)
        if family:
            found.setdefault(family, []).append(name)
    return found


def uncore_command(family: str, pmus: list[str], root: SysRoot | None = None) -> str:
    """The perf command that counts the controllers' traffic, with the events the kernel names for them."""
    root = root or default_root()
    events = [e for e in TRAFFIC if root.exists(f"{PMU_DIR}/{pmus[0]}/events/{e}")]
    if not events:
        return f"perf list | grep {family}` names its events; `perf stat -a -e {family}/EVENT/ -- sleep 5"
    return f"perf stat -a -e {','.join(f'{family}/{e}/' for e in events)} -- sleep 5"


# ANCHOR: monitors
def monitors(root: SysRoot | None = None) -> dict[str, Any]:
    """What watches the memory controller on this machine, and a sentence that says it."""
    files, pmus = mbm_files(root), uncore_pmus(root)
    said = []
    if files:
        said.append(f"resctrl counts memory bandwidth here (mbm_total_bytes in {len(files)} L3 domain(s)): the lab "
                    "reads the default group's count around every period, the whole machine's traffic")
    for family, names in pmus.items():
        said.append(f"the uncore has {len(names)} memory-controller PMU(s) ({family}): as root, "
                    f"`{uncore_command(family, names, root)}` counts what the controllers moved while the lab runs")
    if not said:
        said.append("nothing here watches the memory controller: no resctrl bandwidth monitoring "
                    f"({RESCTRL}/info/L3_MON) and no memory-controller PMU ({PMU_DIR}/uncore_imc_*, amd_umc_*), as "
                    "in most VMs. The lab counts the bytes the neighbour itself wrote: only a program you wrote can "
                    "tell you that; on bare metal resctrl or the uncore tells it of every program")
    return {"mbm_files": files, "uncore": pmus, "text": "; ".join(said)}
# ANCHOR_END: monitors
