"""A Jupyter Server extension: the course's landing page and its book, served by the JupyterLab of `make lab`.

/perflab/        the landing page (perflab.landing), made anew on each request
/perflab/book/   the built book (book/build), under the session's login
/hub/user-redirect/...   what JupyterHub answers under a workshop's hub: "the same path in my own server";
                 the course's links between notebooks and book use it, so one link works in both

Jupyter's own /files/ handler serves HTML in a sandbox (its scripts get a
unique origin) and the book's CSS, JavaScript and search index then fail;
the book is ours, so it is served as an ordinary site, and any chapter's URL opens
on its own (a bookmark sends no Referer), still behind the login. Enabled for the
course's environment by etc/jupyter/jupyter_server_config.d/perflab.json,
which `make` installs from deps/.
"""

from __future__ import annotations

from pathlib import Path

from jupyter_server.base.handlers import AuthenticatedFileHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .paths import REPO_ROOT

BOOK_BUILD = REPO_ROOT / "book" / "build"


class LandingHandler(JupyterHandler):
    @web.authenticated
    def get(self) -> None:
        from .landing import render_html

        self.set_header("Cache-Control", "no-cache")  # progress changes between visits
        # Jupyter shortens a root under $HOME to "~/...", as it is under a workshop's hub;
        # base_url is "/user/NAME/" there
        root = Path(self.settings["server_root_dir"]).expanduser()
        self.finish(render_html(root, self.base_url))


class BookHandler(AuthenticatedFileHandler):
    @property
    def content_security_policy(self) -> str:
        # Jupyter's own policy, without the sandbox it adds for files: the book's scripts (sidebar, search) must run.
        return JupyterHandler.content_security_policy.fget(self)

    def check_xsrf_cookie(self) -> None:
        """Let a chapter open from a bookmark, a typed URL or another site's link: no Referer check.

        For a GET logged in by cookie, Jupyter's file handler asks for a Referer from this server and answers 403
        ("Blocking request from unknown origin") without one, so that another site cannot include a learner's
        files through their login. The book is the course's own text, the same for every learner, with nothing
        of theirs in it. The login is still required: get() is @web.authenticated, as for every file."""


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "perflab.jupyter"}]


def _load_jupyter_server_extension(serverapp) -> None:
    from .workspace import prepare

    serverapp.log.info("perflab: %s", prepare().summary())
    base = serverapp.web_app.settings["base_url"]
    if not (BOOK_BUILD / "index.html").exists():
        serverapp.log.warning("perflab: the book is not built (%s): run `make book`", BOOK_BUILD)
    serverapp.web_app.add_handlers(".*$", [
        (url_path_join(base, "perflab/?"), LandingHandler),
        (url_path_join(base, "perflab/book/(.*)"), BookHandler,
         {"path": str(BOOK_BUILD), "default_filename": "index.html"}),
        # at the site's root, not below base: under a hub this path is the hub's, and never reaches us
        (r"/hub/user-redirect/(.*)", web.RedirectHandler, {"url": url_path_join(base, "{0}")}),
    ])
