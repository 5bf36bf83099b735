"""Run by test_owner.py in a pytest of its own, which it then kills: a session-scoped server,
ready, its run id written to $FIREDUP_TEST_RUN_ID_FILE, and a test that waits to be killed."""

import os
import time

import pytest


@pytest.fixture(scope="session")
def server(firedup_server):
    return firedup_server(
        ["sh", "-c", "echo ready; exec sleep 300"], ready_line="ready", grace="2s"
    )


def test_waits_to_be_killed(server):
    path = os.environ["FIREDUP_TEST_RUN_ID_FILE"]
    with open(path + ".tmp", "w") as f:
        f.write(server.run_id)
    os.rename(path + ".tmp", path)
    time.sleep(300)
