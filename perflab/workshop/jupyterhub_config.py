"""JupyterHub's configuration for `perflab workshop up`, read from the roster in PERFLAB_WORKSHOP_DIR.

Learners get JupyterHub's LocalProcessSpawner (in their cgroup: perflab.workshop.spawner): a
single-user JupyterLab from the course's environment, run as their own system user, rooted in
their home, with their workspace,
results and progress in ~/work. The instructor logs in as "instructor" and lands on the class
dashboard, a hub service. Everything listens on 127.0.0.1 unless `up --ip` says otherwise.
"""

import os
import pwd
from pathlib import Path

from tornado import web

from perflab.workshop import roster
from perflab.workshop.checks import PROXY

c = get_config()  # noqa: F821 (JupyterHub defines it when it loads this file)
workshop = roster.require()
state = roster.state_dir()

c.JupyterHub.ip = workshop.ip
c.JupyterHub.port = workshop.port
if workshop.ssl_cert:
    c.JupyterHub.ssl_cert = workshop.ssl_cert
    c.JupyterHub.ssl_key = workshop.ssl_key
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = workshop.hub_port
c.ConfigurableHTTPProxy.command = [str(PROXY)]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{workshop.proxy_api_port}"
c.ConfigurableHTTPProxy.auth_token = workshop.proxy_token
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")

c.JupyterHub.authenticator_class = "perflab.workshop.auth.LearnerPasswords"
c.Authenticator.allow_all = True  # the authenticator itself admits only the roster's names
c.Authenticator.admin_users = {roster.INSTRUCTOR}


c.JupyterHub.template_paths = [str(Path(roster.__file__).with_name("templates"))]  # the instructor's home: no server


def landing(handler):
    user = handler.current_user
    if user is not None and user.name == roster.INSTRUCTOR:
        return "/services/dashboard/"  # the instructor has no system user and no server of their own
    return "/hub/spawn"  # starts the learner's server, then opens its default URL, the course's landing page


c.JupyterHub.default_url = landing


# ANCHOR: learner_environment
def learner_environment(spawner):
    """Each learner's server: rooted in their home, the workspace ~/work in it as work/ is in the checkout for
    `make lab` (so the course's links name the same paths), on their reserved CPUs if they have some."""
    if spawner.user.name == roster.INSTRUCTOR:
        raise web.HTTPError(403, "the instructor has no server of their own: the class is on the dashboard, "
                                 "/services/dashboard/")
    account = pwd.getpwnam(spawner.user.name)
    learner = roster.learner_of(spawner.user.name)
    work = os.path.join(account.pw_dir, "work")
    try:  # made by root in the learner's home: a link the learner put there is never followed
        os.mkdir(work, mode=0o700)
        os.chown(work, account.pw_uid, account.pw_gid, follow_symlinks=False)
    except FileExistsError:
        pass  # theirs already: the server, as the learner, uses whatever it is
    spawner.notebook_dir = account.pw_dir
    spawner.environment.update(roster.learner_environment(workshop, learner, account.pw_dir))
    if learner in workshop.cpus:  # their server, kernels and labs on their own CPUs
        spawner.cmd = ["taskset", "--cpu-list", workshop.cpus[learner], *c.Spawner.cmd]


c.JupyterHub.spawner_class = "perflab.workshop.spawner.LearnerSpawner"
c.Spawner.pre_spawn_hook = learner_environment
# ANCHOR_END: learner_environment
c.Spawner.cmd = [str(roster.VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/perflab/"
c.Spawner.http_timeout = 120  # the first start copies the notebooks and imports the course: slow under load

c.JupyterHub.services = [
    {"name": "dashboard", "url": f"http://127.0.0.1:{workshop.dashboard_port}", "oauth_no_confirm": True,
     "command": [str(roster.VENV_BIN / "python"), "-m", "perflab.workshop.dashboard"],
     "environment": {"PERFLAB_WORKSHOP_DIR": str(state), roster.MARK: str(state)}},
    {"name": "perflab-cli", "api_token": workshop.cli_token},
]
c.JupyterHub.load_roles = [
    {"name": "class-reader", "services": ["dashboard", "perflab-cli"],
     "scopes": ["list:users", "read:users", "read:servers"]},
]
