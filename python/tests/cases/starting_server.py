"""Run by test_owner.py in a pytest of its own, which it interrupts (SIGINT to that process
alone) while the server is still starting: it never prints its ready line."""


def test_starts_a_server_that_never_gets_ready(firedup_server):
    firedup_server(
        ["sh", "-c", "echo starting; exec sleep 300"], ready_line="never", grace="2s"
    )
    raise AssertionError("never reached: the server never becomes ready")
