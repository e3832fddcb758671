"""JupyterHub's configuration for `perflab workshop up`, read from the roster in PERFLAB_WORKSHOP_DIR.

Learners get JupyterHub's LocalProcessSpawner: a single-user JupyterLab from the course's
environment, run as their own system user, rooted in their own workspace (~/work) with their
results and progress in it. The instructor logs in as "instructor" and lands on the class
dashboard, a hub service. Everything listens on 127.0.0.1 unless `up --ip` says otherwise.
"""

import os
import pwd

from perflab.lock import lock_path
from perflab.paths import REPO_ROOT
from perflab.workshop import roster

c = get_config()  # noqa: F821 (JupyterHub defines it when it loads this file)
workshop = roster.require()
state = roster.state_dir()
venv_bin = REPO_ROOT / ".venv" / "bin"

c.JupyterHub.ip = workshop.ip
c.JupyterHub.port = workshop.port
if workshop.ssl_cert:
    c.JupyterHub.ssl_cert = workshop.ssl_cert
    c.JupyterHub.ssl_key = workshop.ssl_key
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = workshop.hub_port
c.ConfigurableHTTPProxy.command = [str(REPO_ROOT / ".tools/proxy/node_modules/.bin/configurable-http-proxy")]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{workshop.proxy_api_port}"
c.ConfigurableHTTPProxy.auth_token = workshop.proxy_token
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")

c.JupyterHub.authenticator_class = "perflab.workshop.auth.LearnerPasswords"
c.Authenticator.allow_all = True  # the authenticator itself admits only the roster's names
c.Authenticator.admin_users = {roster.INSTRUCTOR}


def landing(handler):
    user = handler.current_user
    if user is not None and user.name == roster.INSTRUCTOR:
        return "/services/dashboard/"  # the instructor has no system user and no server of their own
    return "/hub/spawn"  # starts the learner's server, then opens its default URL, the course's landing page


c.JupyterHub.default_url = landing


# ANCHOR: learner_environment
def learner_environment(spawner):
    """Each learner's server: rooted in their home, the workspace ~/work in it as work/ is in the checkout for
    `make lab` (so the course's links name the same paths), results and progress there, the tools on PATH."""
    account = pwd.getpwnam(spawner.user.name)
    work = os.path.join(account.pw_dir, "work")
    os.makedirs(work, mode=0o700, exist_ok=True)
    os.chown(work, account.pw_uid, account.pw_gid)
    spawner.notebook_dir = account.pw_dir
    spawner.environment.update({
        "PERFLAB_WORKSPACE": work,
        "PERFLAB_RESULTS": os.path.join(work, "results"),
        "PERFLAB_LEARNER": roster.learner_of(spawner.user.name),
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        **({"PERFLAB_LOCK": workshop.lock} if workshop.lock else {}),
    })
    reserved = workshop.cpus.get(roster.learner_of(spawner.user.name))
    if reserved:  # their server, kernels and labs on their own CPUs, with a lock of their own
        spawner.cmd = ["taskset", "--cpu-list", reserved, *c.Spawner.cmd]
        spawner.environment["PERFLAB_CPUS"] = reserved
        spawner.environment["PERFLAB_LOCK"] = str(lock_path().with_name(f"perflab-measure-{spawner.user.name}.lock"))


c.Spawner.pre_spawn_hook = learner_environment
# ANCHOR_END: learner_environment
c.Spawner.cmd = [str(venv_bin / "jupyterhub-singleuser")]
c.Spawner.default_url = "/perflab/"
c.Spawner.http_timeout = 120  # the first start copies the notebooks and imports the course: slow under load

c.JupyterHub.services = [
    {"name": "dashboard", "url": f"http://127.0.0.1:{workshop.dashboard_port}", "oauth_no_confirm": True,
     "command": [str(venv_bin / "python"), "-m", "perflab.workshop.dashboard"],
     "environment": {"PERFLAB_WORKSHOP_DIR": str(state)}},
    {"name": "perflab-cli", "api_token": workshop.cli_token},
]
c.JupyterHub.load_roles = [
    {"name": "class-reader", "services": ["dashboard", "perflab-cli"],
     "scopes": ["list:users", "read:users", "read:servers"]},
]
