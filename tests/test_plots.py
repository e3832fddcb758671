"""The shared plots draw what they claim, on recorded machines."""

from __future__ import annotations

import pytest

from conftest import FIXTURE_MACHINES
from perflab import stats
from perflab.plots import distributions, topology
from perflab.probe import probe
from perflab.sysfs import SysRoot


@pytest.mark.parametrize("machine, cores, llcs, packages", [("intel-2s-smt", 32, 2, 2), ("amd-chiplet", 16, 2, 1), ("kvm-2vcpu", 2, 1, 1)])
def test_topology_draws_every_core_cache_and_package(machine, cores, llcs, packages):
    figure = topology(probe(SysRoot(FIXTURE_MACHINES / machine)))
    ax = figure.axes[0]
    assert len(ax.patches) == cores + llcs + packages
    labels = {t.get_text() for t in ax.texts}
    online = probe(SysRoot(FIXTURE_MACHINES / machine)).online_cpus
    assert {str(c) for c in online} <= labels, "every CPU id is written in its core"


def test_distributions_marks_the_centre_with_its_interval():
    samples = {"A": [10.0, 11.0, 12.0, 11.5], "B": [20.0, 21.0, 19.5, 20.5]}
    ax = distributions(samples, "ns", centre=stats.median, centre_ci=stats.bootstrap_ci, centre_name="median").axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A", "B"]
    assert any("median 20" in t.get_text() for t in ax.texts)


def test_one_outlier_does_not_stretch_a_strip_plot():
    from perflab.stats import plot_range

    near_24 = [24.0 + 0.1 * (i % 7) for i in range(40)]
    low, high = plot_range(near_24 + [1200.0])
    assert 20 < low < 24 and 24.6 < high < 30, (low, high)
    figure = distributions({"pair": near_24 + [1200.0]}, "ns")
    assert figure.axes[0].get_xlim()[1] < 30
    assert "outlier" in figure.axes[0].get_xlabel()
