#!/bin/sh
# A fake slow-starting GPU server for the demo: prints the startup phases sglang prints, then ready.
# With DEMO_FAIL=oom it dies the way a real server dies when CUDA graph capture runs out of memory.
echo "[2025-03-01 10:00:00] Init torch distributed begin."
sleep 0.3
echo "[2025-03-01 10:00:01] Load weight begin. avail mem=78.50 GB"
for p in 0 25 50 75 100; do printf 'Loading safetensors checkpoint shards: %3d%% Completed | %d/4 [00:0%d<00:03]\r' "$p" "$((p/25))" "$((p/25))"; sleep 0.2; done
echo
echo "[2025-03-01 10:00:03] Capture cuda graph begin. This can take up to several minutes. avail mem=20.1 GB"
sleep 0.5
if [ "${DEMO_FAIL:-}" = oom ]; then
  echo "Traceback (most recent call last):"
  echo '  File "cuda_graph_runner.py", line 301, in capture'
  echo "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.2 GiB is free."
  exit 1
fi
echo "[2025-03-01 10:00:04] The server is fired up and ready to roll!"
exec sleep 3600
