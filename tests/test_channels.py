"""The grading kernel's client looks for replies every second: a poll that missed its wake-up costs a second, not
the cell's whole timeout (perflab.grading.channels)."""

from __future__ import annotations

import asyncio
from queue import Empty
from types import SimpleNamespace

import pytest
import zmq
import zmq.asyncio
from jupyter_client import AsyncKernelManager
from jupyter_client.channels import AsyncZMQSocketChannel

from perflab.grading import channels
from perflab.grading.kernel import kernel_config


def test_a_grading_kernels_client_waits_in_looks(tmp_path):
    client = AsyncKernelManager(config=kernel_config(str(tmp_path))).client()
    assert isinstance(client, channels.LookingClient)
    assert client.shell_channel_class is channels.LookingChannel
    assert client.iopub_channel_class is channels.LookingChannel


@pytest.fixture
def polls(monkeypatch):
    """The timeouts each underlying poll was given; the reply comes at the fourth poll. A poll moves the channel's
    clock on by its timeout instead of sleeping it: on a busy machine a real 0.05 s sleep took 0.11 s, and the
    looks left then were fewer."""
    asked, now = [], [0.0]

    async def poll_once(self, timeout=None):
        asked.append(timeout)
        if len(asked) < 4:
            now[0] += timeout
            raise Empty
        return {"msg_type": "execute_reply"}

    monkeypatch.setattr(AsyncZMQSocketChannel, "get_msg", poll_once)
    monkeypatch.setattr(channels, "LOOK_S", 0.05)
    monkeypatch.setattr(channels, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return asked


@pytest.fixture
def channel():
    context = zmq.asyncio.Context()
    socket = context.socket(zmq.DEALER)
    yield channels.LookingChannel(socket, None)
    socket.close(linger=0)
    context.term()


@pytest.mark.parametrize("timeout", [None, 10])
def test_a_reply_that_a_poll_missed_is_seen_at_the_next_look(polls, channel, timeout):
    assert asyncio.run(channel.get_msg(timeout=timeout)) == {"msg_type": "execute_reply"}
    assert polls == [0.05] * 4, "one long poll, not looks"


def test_the_looks_end_at_the_callers_timeout(polls, channel):
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=0.12))
    assert len(polls) == 3 and polls[:2] == [0.05, 0.05] and 0 < polls[2] <= 0.02 + 1e-3, polls
