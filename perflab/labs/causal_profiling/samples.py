"""The coz paper's profiles that Debian's coz-profiler ships: "most samples" beside "largest causal impact"."""

from __future__ import annotations

from pathlib import Path

from ... import formatting
from ...errors import PerflabError
from . import coz

SAMPLE_PROFILES = Path("/usr/share/coz-profiler/viewer/profiles")


def sample_profiles() -> list[str]:
    """Names of the profiles coz-profiler ships (from the coz paper's benchmarks), if it is installed."""
    return sorted(p.stem for p in SAMPLE_PROFILES.glob("*.coz"))


def read_sample(name: str) -> coz.Profile:
    if name not in sample_profiles():
        raise PerflabError(f"no sample profile {name!r}; the samples are: {', '.join(sample_profiles()) or 'none'} "
                           "(Debian's coz-profiler installs them; run `make lab`)")
    return coz.read(SAMPLE_PROFILES / f"{name}.coz")


def describe(profile: coz.Profile, top: int = 5) -> str:
    """What is in a profile: runs, experiments, the progress point, where the samples fell, what coz ranks first."""
    point = profile.points()[0]
    total = sum(profile.samples.values()) or 1
    by_samples = sorted(profile.samples.items(), key=lambda kv: -kv[1])[:top]
    ranked = coz.rank_lines(profile, point, min_experiments=20)[:top]
    rows = [("most samples (what perf would show)", "share", "largest causal impact (coz)", "mean predicted")]
    for i in range(max(len(by_samples), len(ranked))):
        left = by_samples[i] if i < len(by_samples) else ("", 0)
        right = ranked[i] if i < len(ranked) else ("", None)
        rows.append((coz.short_location(left[0]), f"{left[1] / total:.0%}" if left[0] else "",
                     coz.short_location(right[0]), f"{right[1]:+.1%}" if right[1] is not None else ""))
    return (f"{profile.runs} run(s), {len(profile.experiments)} experiments, progress point {point}\n"
            + formatting.table(rows) + "".join(f"\nwarning: {w}" for w in profile.warnings))
