"""Learners' servers: JupyterHub's LocalProcessSpawner, each server started inside its learner's cgroup."""

from __future__ import annotations

from jupyterhub.spawner import LocalProcessSpawner

from . import cgroups


class LearnerSpawner(LocalProcessSpawner):
    def make_preexec_fn(self, name):
        """Into the learner's group while still root, then their user: the server, its kernels and every lab
        they start are held to the group's limits from their first instruction."""
        become_the_learner = super().make_preexec_fn(name)

        def preexec() -> None:
            cgroups.enter(name)
            become_the_learner()

        return preexec
