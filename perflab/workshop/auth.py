"""JupyterHub's login for a workshop: each learner's own password, checked against the roster's hash.

The roster is read at every login, so learners that `perflab workshop add-learners` adds can log
in without restarting the hub. A learner "alice" becomes the hub (and system) user perflab-alice.
"""

from __future__ import annotations

from jupyterhub.auth import Authenticator

from . import roster


class LearnerPasswords(Authenticator):
    async def authenticate(self, handler, data):
        name = (data.get("username") or "").strip().lower()
        password = data.get("password") or ""
        workshop = roster.load()
        if workshop is None:
            return None
        if name == roster.INSTRUCTOR:
            return name if roster.password_matches(password, workshop.instructor_hash) else None
        stored = workshop.learners.get(name)
        if stored and roster.password_matches(password, stored):
            return roster.system_user(name)
        self.log.warning("perflab: failed login for %r", name)
        return None
