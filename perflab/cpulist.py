"""CPU lists as the kernel and perf write them: "0-3,8,10-11"."""

from __future__ import annotations

from .errors import PerflabError

MAX_CPU_ID = 8191  # Linux's largest NR_CPUS; a bigger id is a typo, and "0-10**9" must not fill the memory


def parse_cpulist(text: str) -> list[int]:
    """Parse "0-3,8" into [0, 1, 2, 3, 8]; raises PerflabError on malformed text."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                first, last = (int(x) for x in part.split("-", 1))
                if last < first:
                    raise ValueError
                cpus.extend(range(first, min(last, MAX_CPU_ID + 1) + 1))
            else:
                cpus.append(int(part))
        except ValueError:
            raise PerflabError(
                f"bad CPU list {text!r}: write CPU ids like 0-3,8 (see `perflab probe` for the online CPUs)"
            ) from None
    if not cpus:
        raise PerflabError(f"empty CPU list {text!r}: write CPU ids like 0-3,8 (see `perflab probe` for the online "
                           "CPUs)")
    if max(cpus) > MAX_CPU_ID:
        raise PerflabError(f"CPU {max(cpus)} in {text!r} is beyond any machine (Linux numbers CPUs below "
                           f"{MAX_CPU_ID + 1}): pick CPUs from `perflab probe`")
    return sorted(set(cpus))


def format_cpulist(cpus: list[int]) -> str:
    """Inverse of parse_cpulist: [0, 1, 2, 3, 8] -> "0-3,8"."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        ranges.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(ranges)


def check_cpus(cpus: list[int], online: list[int]) -> None:
    """Refuse CPU ids that are not online here, with the fix in the message."""
    missing = [c for c in cpus if c not in online]
    if missing:
        raise PerflabError(
            f"CPU {format_cpulist(missing)} is not online on this machine (online: {format_cpulist(online)}); "
            "pick CPUs from `perflab probe`"
        )
