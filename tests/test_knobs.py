"""System knobs and their journal, on copies of fixture trees: every change is put back, however the run ends."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURE_MACHINES, REPO, StubLab, run_cli
from perflab import journal, system
from perflab.errors import PerflabError
from perflab.knobs import Governor, IrqAffinity, NumaBalancing, RqAffinity, TracefsMount, Turbo, disk_irqs, used_by_labs
from perflab.lock import measurement_lock
from perflab.sysfs import SysRoot


@pytest.fixture
def tree(tmp_path) -> Path:
    """A private copy of a recorded server's kernel files (symbolic links kept, as sysfs has them)."""
    copy = tmp_path / "root"
    shutil.copytree(FIXTURE_MACHINES / "intel-2s-smt", copy, symlinks=True)
    return copy


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
    }


def test_knobs_read_what_the_fixture_holds(tree):
    root = SysRoot(tree)
    assert Turbo(root=root).read() == "0" and Turbo(root=root).meaning("0") == "on" and Turbo(root=root).off == "1"
    assert NumaBalancing(root=root).read() == "1"
    assert RqAffinity("nvme0n1", root).meaning("2") == "the submitting CPU itself"
    assert disk_irqs(root, "nvme0n1") == [120, 121, 122, 123]
    assert IrqAffinity("122", root).read() == "16-31"
    kinds = [knob.kind for knob in used_by_labs(root)]
    assert kinds.count("governor") == 64 and kinds.count("irq_affinity") == 4 and "rq_affinity" in kinds


@pytest.mark.parametrize("knob, target", [(RqAffinity, "../../etc/passwd"), (IrqAffinity, "7; rm"),
                                          (Governor, "cpu0"), (NumaBalancing, "x")])
def test_a_target_is_a_name_never_a_path(knob, target):
    with pytest.raises(PerflabError, match="is not a"):
        knob(target, SysRoot("/nonexistent"))


def test_show_folds_alike_knobs_and_says_what_changed(tree):
    root = SysRoot(tree)
    text = system.show(root)
    assert "governor policy0..policy63 (64)" in text and "the first CPU of the submitter's group" in text
    with journal.SystemChanges(root=root) as changes:
        changes.set(RqAffinity("nvme0n1", root), "2")
        assert f"a run, pid {os.getpid()} (was 1)" in system.show(root)
    assert "a run, pid" not in system.show(root)


def test_a_block_restores_on_exit_and_on_error(tree):
    root, before = SysRoot(tree), snapshot(tree)
    with journal.SystemChanges(root=root) as changes:
        changes.set(RqAffinity("nvme0n1", root), "2")
        changes.set(IrqAffinity("120", root), "5")
        changes.set(RqAffinity("nvme0n1", root), "0")  # twice: the first old value wins in the end
        assert RqAffinity("nvme0n1", root).read() == "0" and IrqAffinity("120", root).read() == "5"
    assert snapshot(tree) == before
    with pytest.raises(ZeroDivisionError), journal.SystemChanges(root=root) as changes:
        changes.set(NumaBalancing(root=root), "0")
        1 / 0
    assert snapshot(tree) == before and not journal.Journal(root).path.exists()


def test_a_missing_knob_is_one_clear_error(tree):
    root = SysRoot(tree)
    with (
        pytest.raises(PerflabError, match="not available on this machine"),
        journal.SystemChanges(root=root) as changes,
    ):
        changes.set(RqAffinity("sdz", root), "2")


CHANGER = textwrap.dedent("""
    import time
    from perflab.journal import SystemChanges
    from perflab.knobs import IrqAffinity, NumaBalancing, RqAffinity
    with SystemChanges() as changes:
        changes.set(RqAffinity("nvme0n1"), "2")
        changes.set(IrqAffinity("121"), "3")
        changes.set(NumaBalancing(), "0")
        print("changed", flush=True)
        time.sleep(60)
""")


def _changer(tree: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", CHANGER], stdout=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, "PERFLAB_SYSROOT": str(tree)})
    assert process.stdout.readline().strip() == "changed"
    assert (tree / "sys/block/nvme0n1/queue/rq_affinity").read_text() == "2\n"
    return process


def test_kill_9_mid_change_then_system_reset_leaves_the_tree_byte_identical(tree):
    before = snapshot(tree)
    changer = _changer(tree)
    changer.kill()  # SIGKILL: no finally, no handler runs
    changer.wait()
    assert snapshot(tree) != before, "the killed process left its changes behind"
    done = run_cli("system", "reset", env={"PERFLAB_SYSROOT": str(tree)})
    assert done.returncode == 0, done.stderr
    assert "rq_affinity nvme0n1 back to '1'" in done.stdout and "numa_balancing back to '1'" in done.stdout
    assert snapshot(tree) == before


def test_sigterm_restores_in_the_process_itself(tree):
    before = snapshot(tree)
    changer = _changer(tree)
    changer.send_signal(signal.SIGTERM)
    assert changer.wait(timeout=30) == 128 + signal.SIGTERM
    assert snapshot(tree) == before


def test_the_next_run_replays_what_a_killed_run_left(tree, monkeypatch, capsys):
    before = snapshot(tree)
    changer = _changer(tree)
    changer.kill()
    changer.wait()
    monkeypatch.setenv("PERFLAB_SYSROOT", str(tree))
    verdict = StubLab().run(quick=True, progress=False)
    assert verdict.results and snapshot(tree) == before
    assert "perflab: restored rq_affinity nvme0n1 back to '1'" in capsys.readouterr().err


def test_a_live_run_is_left_alone_and_tune_stays_until_reset(tmp_path):
    copy = tmp_path / "amd"
    shutil.copytree(FIXTURE_MACHINES / "amd-chiplet", copy, symlinks=True)
    root, before = SysRoot(copy), snapshot(copy)
    done = system.tune(root)
    assert "governor policy0: schedutil -> performance" in done and "turbo: 1 -> 0" in done
    assert journal.recover(root) == [], "a run's recovery never undoes `system tune`"
    assert Governor("policy3", root).read() == "performance"
    with journal.SystemChanges(root=root) as changes:
        changes.set(RqAffinity("nvme0n1", root), "2")
        assert journal.recover(root) == [], "this run is alive: its change stays"
        restored = journal.reset(root)
        assert "governor policy3 back to 'schedutil'" in restored and "turbo back to '1'" in restored
        assert RqAffinity("nvme0n1", root).read() == "2", "reset leaves a live run's change to the run"
    assert snapshot(copy) == before
    system.tune(root)
    assert system.reset_all(root) and snapshot(copy) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="recovering as another user needs root to switch users")
def test_a_block_that_changed_nothing_never_opens_the_journal(tmp_path):
    """A learner's lab 5 run on a fresh boot failed at the end of its measurement: its block changed nothing, yet
    opened the journal folder to restore nothing, and a learner may not make /run/perflab."""
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    with journal.SystemChanges(journal=journal.Journal(path=str(blocked / "journal"))):
        pass  # no knob set
    with pytest.raises(PerflabError, match="cannot use the journal folder"), \
            journal.SystemChanges(journal=journal.Journal(path=str(blocked / "journal"))) as changes:
        changes.set(RqAffinity("nvme0n1", SysRoot(FIXTURE_MACHINES / "amd-chiplet")), "2")


def test_a_user_who_may_not_write_the_journal_recovers_nothing_and_goes_on(tmp_path):
    """A learner's lab run recovers under the lock while root's run, not under it, has a change in the journal."""
    folder = Path(tempfile.mkdtemp(dir="/tmp"))  # tmp_path's parents are 0700: nobody could reach it
    try:
        folder.chmod(0o755)
        shutil.copytree(FIXTURE_MACHINES / "amd-chiplet", folder / "amd", symlinks=True)
        root = SysRoot(folder / "amd")
        with journal.SystemChanges(root=root) as changes:
            changes.set(RqAffinity("nvme0n1", root), "2")
            recovered = subprocess.run(
                [
                    "runuser",
                    "-u",
                    "nobody",
                    "--",
                    sys.executable,
                    "-c",
                    f"from perflab import journal, sysfs; print(journal.recover(sysfs.SysRoot({str(root.root)!r})))",
                ],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
            assert recovered.returncode == 0 and recovered.stdout.strip() == "[]", recovered.stderr
    finally:
        shutil.rmtree(folder)


def test_system_reset_never_waits_behind_a_measurement(tree):
    """It takes the journal's own lock only: restoring the machine never queues behind another user's run."""
    before = snapshot(tree)
    changer = _changer(tree)
    changer.kill()
    changer.wait()
    with measurement_lock("another user's perflab run"):
        done = run_cli("system", "reset", env={"PERFLAB_SYSROOT": str(tree)}, timeout=30)
    assert done.returncode == 0, done.stderr
    assert snapshot(tree) == before


def test_a_reset_never_pulls_a_knob_from_under_a_live_run(tree, capsys):
    """A killed run set rq_affinity 1 -> 2, a live run then 2 -> 0: reset leaves 0 to the live run, whose
    entry takes over the first value and puts back 1 when the run ends."""
    root, before = SysRoot(tree), snapshot(tree)
    changer = _changer(tree)
    changer.kill()
    changer.wait()
    with journal.SystemChanges(root=root) as changes:
        changes.set(RqAffinity("nvme0n1", root), "0")
        restored = journal.reset(root)
        assert RqAffinity("nvme0n1", root).read() == "0" and "numa_balancing back to '1'" in restored
        assert (f"left rq_affinity nvme0n1 as it is: the run that changed it since (pid {os.getpid()}) puts back "
                "'1' when it ends") in capsys.readouterr().err
    assert snapshot(tree) == before


def test_a_damaged_journal_line_is_skipped_not_fatal(tree, capsys):
    root = SysRoot(tree)
    path = journal.Journal(root).path
    path.parent.mkdir(parents=True)
    entry = {"kind": "numa_balancing", "target": "", "old": "1", "owner": "run", "pid": 1, "started": -1}
    path.write_text("{not json\n" + json.dumps(entry) + "\n")
    NumaBalancing(root=root).write("0")
    assert journal.recover(root) == ["numa_balancing back to '1'"]
    assert "damaged line" in capsys.readouterr().err and NumaBalancing(root=root).read() == "1"


# ---------------------------------------------------------------- tracefs, mounted through the journal

def test_tracefs_reads_mounted_unmounted_or_absent(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    knob = TracefsMount(root=SysRoot(tmp_path))
    (proc / "filesystems").write_text("nodev\tsysfs\n")
    assert knob.read() is None and not knob.available()
    (proc / "filesystems").write_text("nodev\tsysfs\nnodev\ttracefs\n")
    assert knob.read() == "unmounted" and knob.available()
    (tmp_path / "sys" / "kernel" / "tracing").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "tracing" / "available_events").write_text("irq:softirq_entry\n")
    assert knob.read() == "mounted"
    with pytest.raises(PerflabError, match="only on the live machine"):
        knob.write("unmounted")


def _live_tracefs() -> TracefsMount:
    knob = TracefsMount()
    if os.geteuid() != 0 or knob.read() is None:
        pytest.skip("needs root and a kernel with tracefs")
    return knob


MOUNT_AND_WAIT = """
from perflab.journal import SystemChanges
from perflab.knobs import TracefsMount
with SystemChanges() as changes:
    changes.set(TracefsMount(), "mounted")
    print("mounted", flush=True)
    input()
"""


@pytest.mark.xdist_group("lab-runs")  # the real tracefs, as lab 3's runs mount it: one after another with them
def test_tracefs_mounted_for_a_run_is_unmounted_after_it_and_after_a_kill_9():
    knob = _live_tracefs()
    before = knob.read()
    with journal.SystemChanges() as changes:
        changes.set(knob, "mounted")
        assert knob.read() == "mounted"
    assert knob.read() == before
    if before == "mounted":
        return  # this machine mounts tracefs itself: a run leaves it so and there is nothing to recover
    holder = subprocess.Popen([sys.executable, "-c", MOUNT_AND_WAIT], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "mounted"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        assert knob.read() == "mounted"  # nothing ran after kill -9...
        assert "tracefs_mount back to 'unmounted'" in journal.recover()  # ...until the next run replays the journal
        assert knob.read() == "unmounted"
    finally:
        if holder.poll() is None:
            holder.kill()
        journal.recover()
