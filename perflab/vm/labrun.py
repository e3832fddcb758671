"""`perflab run LAB --vm PROFILE`: the lab runs in the guest, its results come back to the host's results/.

Each result the guest wrote gains a `vm` block (profile, KVM or TCG and why, the QEMU command
line) and the guest's own probe, so nobody later mistakes an emulated machine's numbers for
the host's, and the file says what the guest could and could not show.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

from .. import results
from ..errors import PerflabError
from ..paths import results_dir
from .boot import session
from .commands import execute

GUEST_RESULTS = "/exchange/results"


def lab_argv(run_args: list[str]) -> list[str]:
    """The guest's `perflab run`: the host's arguments (all but --vm), as JSON with progress on stderr."""
    return ["python3", "-m", "perflab", "run", *run_args, "--json", "--progress"]


def run_lab(lab: str, profile: str, run_args: list[str], progress: bool = True) -> dict:
    """Run `perflab run RUN_ARGS` in the profile's VM; return the verdict as JSON, `results` pointing at the host's
    copy."""
    with session(profile, progress=progress) as machine:
        shutil.rmtree(machine.exchange / "results", ignore_errors=True)
        probe_out = io.BytesIO()
        if execute(machine, ["python3", "-m", "perflab", "probe", "--json"], stdout=probe_out) != 0:
            raise PerflabError(
                f"the probe failed inside {profile}; try `perflab vm run {profile} -- python3 -m perflab probe`"
            )
        guest_probe = json.loads(probe_out.getvalue())
        verdict_out, quiet_err = io.BytesIO(), None if progress else io.BytesIO()
        code = execute(machine, lab_argv(run_args), stdout=verdict_out, stderr=quiet_err,
                       env={"PERFLAB_RESULTS": GUEST_RESULTS})
        if code != 0:
            said = quiet_err.getvalue().decode(errors="replace").strip().splitlines()[-1:] if quiet_err else []
            raise PerflabError(f"{lab} failed inside {profile} (exit code {code}): "
                               + (said[0] if said else "its error is printed above"))
        verdict = json.loads(verdict_out.getvalue())
        vm = vm_block(machine.info())  # read now: a VM booted for this run is gone after the block
        copied = bring_back(machine.exchange / "results", results_dir(), vm, guest_probe)
    guest_path = verdict.get("results")
    if guest_path:
        verdict["results"] = str(results_dir() / Path(guest_path).relative_to(GUEST_RESULTS))
    verdict["vm"] = vm | {"copied": [str(p) for p in copied]}
    return verdict


def vm_block(info: dict) -> dict:
    keys = (
        "profile",
        "accel",
        "accel_reason",
        "topology",
        "kernel",
        "kernel_args",
        "qemu",
        "qemu_argv",
        "boot_seconds",
    )
    return {key: info.get(key) for key in keys}


def bring_back(guest_results: Path, host_results: Path, vm: dict, guest_probe: dict) -> list[Path]:
    """Copy every result file the guest wrote into the host's results/, each with the vm block and the guest probe."""
    copied = []
    for source in sorted(guest_results.rglob("*.json")):
        target = host_results / source.relative_to(guest_results)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = json.loads(source.read_text())
        if isinstance(data, dict) and "perflab_result_version" in data:
            data["vm"] = vm
            data["guest_probe"] = guest_probe
            if "path" in data:
                data["path"] = str(target)
            data = results.with_provenance(data, measured_on=(data.get("provenance") or {}).get("machine_id", "guest"))
        results.write_atomic(target, json.dumps(data, indent=1) + "\n")
        copied.append(target)
    for source in sorted(p for p in guest_results.rglob("*") if p.is_file() and p.suffix != ".json"):
        target = host_results / source.relative_to(guest_results)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied.append(target)
    if not copied:
        print("perflab: the lab wrote no result files in the guest", file=sys.stderr)
    return copied
