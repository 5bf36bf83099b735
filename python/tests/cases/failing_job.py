"""Run by test_pytest_output.py in a pytest of its own: a job (until="exit") that exits 3, so the
test must fail with the verdict block and say a job failed."""


def test_runs_a_job(firedup_server):
    firedup_server(["sh", "-c", "echo migrating; exit 3"], until="exit", timeout="60s")
    raise AssertionError("never reached: the job failed")
