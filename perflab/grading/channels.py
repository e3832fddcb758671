"""A kernel client whose replies cannot go unseen for long: nbclient waits on them in one-second looks.

nbclient waits for a cell's reply with one poll of the shell socket, as long as the cell's whole timeout. Once, in
a test run here, that poll missed the reply's wake-up: the cell had long finished, the machine stood at 5% CPU, and
the notebook went on only after the test's 600 s timeout, when the next test ran the event loop again. pyzmq's
asyncio poll looks at the socket's pending messages each time it starts, so a wait made of one-second polls sees a
missed reply within a second. Loaded by its dotted name (kernel.kernel_config), so a notebook that only imports a
lab's checks never imports jupyter_client.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from traitlets import Type

LOOK_S = 1.0


class LookingChannel(AsyncZMQSocketChannel):
    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        """The next message, waiting at most `timeout` seconds (forever if None), polled afresh every second."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await super().get_msg(timeout=LOOK_S if left is None else min(LOOK_S, left))
            except Empty:
                if left is not None and left <= LOOK_S:
                    raise


class LookingClient(AsyncKernelClient):
    shell_channel_class = Type(LookingChannel)
    iopub_channel_class = Type(LookingChannel)
