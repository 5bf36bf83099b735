"""Run by test_pytest_output.py with --firedup-keep: the server must outlive this pytest."""


def test_starts_a_server(firedup_server):
    with firedup_server(
        ["sh", "-c", "echo ready; exec sleep 300"], ready_line="ready", name="kept-by-pytest"
    ) as s:
        print(f"RUN_ID={s.run_id}")
