"""`perflab system show|tune|reset`: the system settings the labs use, tuned and put back."""

from __future__ import annotations

import argparse

SYSROOT_EXAMPLE = "PERFLAB_SYSROOT=tests/fixtures/machines/intel-2s-smt perflab system show"


def add_commands(commands) -> None:
    system = commands.add_parser(
        "system", help="the system settings the labs use; tune the machine, and put everything back",
        description="Every system setting the labs use or change, tuning for steadier numbers, and putting back "
                    "what perflab changed. Every change is journaled before it is made.",
        examples=("perflab system show", "sudo .venv/bin/perflab system tune", "sudo .venv/bin/perflab system reset",
                  SYSROOT_EXAMPLE))
    verbs = system.add_subparsers(dest="system_command", required=True, metavar="VERB", title="verbs")

    p = verbs.add_parser(
        "show", help="every knob the labs use, its value, and whether perflab changed it",
        description="Every knob the labs use (cpufreq governor, turbo, NUMA balancing, each disk's rq_affinity, "
                    "IRQ affinities): its value, what it means, and whether perflab changed it. Reads only.",
        examples=("perflab system show", SYSROOT_EXAMPLE))
    p.set_defaults(func=cmd_show)

    p = verbs.add_parser(
        "tune", help="performance governor and turbo off, kept until reset (root)",
        description="Set the performance cpufreq governor and turn turbo off, for steadier numbers; both are "
                    "journaled and kept until `perflab system reset`. Needs root. In a VM the host decides both.",
        examples=("sudo .venv/bin/perflab system tune",))
    p.set_defaults(func=cmd_tune)

    p = verbs.add_parser(
        "reset", help="put back what tune set and what a killed run left changed (root)",
        description="Restore every setting that `perflab system tune` set and that a run ended by a crash or "
                    "kill -9 left changed, from the journal, and end the programs such a run left running; say what it "
                    "restored and ended. It never waits for a measurement: a live run's own changes stay.",
        examples=("sudo .venv/bin/perflab system reset",))
    p.set_defaults(func=cmd_reset)


def cmd_show(args: argparse.Namespace) -> int:
    from .. import system

    print(system.show())
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from .. import system

    done = system.tune()
    print("\n".join(done) if done else
          "nothing to tune here: no cpufreq governor and no turbo switch (in a VM the host decides both)")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from .. import system

    done = system.reset_all()
    print("\n".join(done) if done else "nothing to restore: perflab has changed nothing on this machine")
    return 0
