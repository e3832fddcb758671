"""Workshop mode: one server, a class of learners, each with their own JupyterLab and workspace.

roster     who is in the workshop, their password hashes, its ports (state folder, root only)
hub        `perflab workshop up | add-learners | status | down`
auth       the hub's login: each learner's own password
dashboard  the instructor's class page, a hub service
jupyterhub_config.py  the hub's configuration, read from the roster
"""
