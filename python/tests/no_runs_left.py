"""After the Python suite (.ci/run): no process of any run in the suite's state directory is
left. Every process firedup starts carries FIREDUP_RUN_ID in its environment, so /proc tells.
Usage: python no_runs_left.py STATE_DIR. Exit 1 when one is left, or when there were no runs
(the check would have proven nothing)."""

import os
import sys

from helpers import processes_of_run

runs_dir = os.path.join(sys.argv[1], "runs")
runs = sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else []
if not runs:
    sys.exit(f"no runs under {runs_dir}: the Python suite started no server")
left = {r: processes_of_run(r) for r in runs}
left = {r: p for r, p in left.items() if p}
for r, pids in left.items():
    print(f"left behind by run {r}: pids {pids}")
if left:
    sys.exit(1)
print(f"no process left of the suite's {len(runs)} runs (checked /proc for FIREDUP_RUN_ID)")
