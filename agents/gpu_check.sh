#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: run the agent for 60 s around a matrix-multiply load and check
#   1. counter energy (nvmlDeviceGetTotalEnergyConsumption) and integrated instant power agree
#      within 5% over the window (the agent's `bench` measures both at 10 Hz);
#   2. the run reached the server: a real one (--server URL --token TOKEN) or, by default, a
#      local sink started here that stores what it receives;
#   3. the daemon (`run`) sampled the same GPU meanwhile and its telemetry reached the server.
#
#   agents/gpu_check.sh [--server URL --token TOKEN] [--seconds 60] [--gpu 0]
#
# Exit: 0 all checks passed; 1 a check failed; 2 nothing to check here (no GPU/driver) or bad usage.
# The load is PyTorch (bf16 matmul) when it is installed with CUDA; without it there is no
# CUDA-free way to load the GPU from here, so the check runs on the idle GPU and says so.
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
SERVER=""
TOKEN=""
SECONDS_LOAD=60
GPU=0
while [ $# -gt 0 ]; do
  case "$1" in
    --server) SERVER="${2:?--server needs a URL}"; shift 2 ;;
    --token) TOKEN="${2:?--token needs a value}"; shift 2 ;;
    --seconds) SECONDS_LOAD="${2:?--seconds needs a number}"; shift 2 ;;
    --gpu) GPU="${2:?--gpu needs an index or UUID}"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$SERVER" ] && [ -z "$TOKEN" ]; then
  echo "gpu_check: --server needs --token" >&2; exit 2
fi

PY="${PYTHON:-python3}"
# The agent from this checkout, whether or not `pip install ./agents` was run.
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
agent() { "$PY" -m accelboard_agent "$@"; }

SIM=()
if [ "${GPU_CHECK_SIMULATE:-0}" = 1 ]; then
  # Self-test of this script where there is no GPU: one simulated GPU, no real load.
  SIM=(--simulate 1 --hostname gpucheck)
fi

if ! "$PY" -c 'import pynvml' 2>/dev/null; then
  echo "gpu_check: nvidia-ml-py is not installed for $PY (pip install ./agents)" >&2; exit 2
fi
if [ "${#SIM[@]}" -gt 0 ]; then
  gpu_line="0 GPU-SIM-gpucheck-0 Simulated H100 80GB HBM3 (GPU_CHECK_SIMULATE=1)"
elif ! gpu_line=$("$PY" - "$GPU" <<'PYEOF' 2>&1
import sys
import pynvml
try:
    pynvml.nvmlInit()
except pynvml.NVMLError as exc:
    print(f"no NVIDIA driver/GPU here ({exc.__class__.__name__})")
    sys.exit(1)
count = pynvml.nvmlDeviceGetCount()
want = sys.argv[1]
for i in range(count):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    uuid = pynvml.nvmlDeviceGetUUID(h)
    if want == str(i) or uuid.startswith(want):
        print(f"{i} {uuid} {pynvml.nvmlDeviceGetName(h)} driver {pynvml.nvmlSystemGetDriverVersion()}")
        sys.exit(0)
print(f"no GPU {want!r} among {count}")
sys.exit(1)
PYEOF
); then
  echo "gpu_check: $gpu_line: nothing to check on this machine" >&2
  exit 2
fi
read -r GPU_INDEX GPU_UUID GPU_NAME <<<"$gpu_line"
echo "gpu_check: GPU $GPU_INDEX $GPU_UUID ${GPU_NAME}"

WORK="$(mktemp -d)"
SINK_PID=""
AGENT_PID=""
cleanup() {
  [ -n "$AGENT_PID" ] && kill -TERM "$AGENT_PID" 2>/dev/null
  [ -n "$SINK_PID" ] && kill -TERM "$SINK_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ -z "$SERVER" ]; then
  TOKEN="gpu-check"
  "$PY" - "$WORK" <<'PYEOF' &
import gzip, json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
out = sys.argv[1]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        body = json.loads(raw)
        with open(f"{out}/received.jsonl", "a") as f:
            f.write(json.dumps({"path": self.path, "body": body}) + "\n")
        data = json.dumps({"batch_id": body.get("batch_id") or body.get("run_id"), "accepted": 1, "duplicate": False}).encode()
        self.send_response(201 if self.path.endswith("/runs") else 200)
        self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(data)))
        self.end_headers(); self.wfile.write(data)
httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
open(f"{out}/port", "w").write(str(httpd.server_address[1]))
httpd.serve_forever()
PYEOF
  SINK_PID=$!
  for _ in $(seq 1 50); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  SERVER="http://127.0.0.1:$(cat "$WORK/port")"
  echo "gpu_check: local sink at $SERVER"
fi

COMMON=(--server "$SERVER" --token "$TOKEN" --spool "$WORK/spool.db")
# Not through the shell function: $! must be the agent itself, so that SIGTERM reaches it.
"$PY" -m accelboard_agent run "${SIM[@]}" --gpus "$GPU_INDEX" --interval 1 --send-interval 2 "${COMMON[@]}" &
AGENT_PID=$!

cat >"$WORK/load.py" <<PYEOF
import sys, time
seconds = float($SECONDS_LOAD)
try:
    import torch
    ok = torch.cuda.is_available()
except ImportError:
    ok = False
if not ok:
    print("gpu_check: torch with CUDA not available: no load generator (CUDA-free fallback: the GPU stays idle)", flush=True)
    time.sleep(seconds)
    sys.exit(0)
torch.cuda.set_device(0)  # CUDA_VISIBLE_DEVICES holds only the GPU under test
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
tflops = 2 * 8192**3 * n / seconds / 1e12
print(f"gpu_check: {n} bf16 8192^3 matmuls, {tflops:.0f} TFLOP/s", flush=True)
PYEOF

echo "gpu_check: bench for ${SECONDS_LOAD} s"
CUDA_VISIBLE_DEVICES="$GPU_UUID" agent bench "${SIM[@]}" --gpus "$GPU_UUID" --model gpu-check-matmul --precision bf16 \
  --scenario offline "${COMMON[@]}" -- "$PY" "$WORK/load.py" 2>"$WORK/bench.err"
BENCH_STATUS=$?
cat "$WORK/bench.err"
kill -TERM "$AGENT_PID"; wait "$AGENT_PID"; AGENT_STATUS=$?; AGENT_PID=""
agent flush "${COMMON[@]}" >/dev/null 2>&1

failed=0
check() { if [ "$1" = ok ]; then echo "PASS $2"; else echo "FAIL $2"; failed=1; fi; }

[ "$BENCH_STATUS" -eq 0 ] && r=ok || r=no; check "$r" "bench exit status $BENCH_STATUS"
line=$(grep -o 'disagreement [0-9.]*%' "$WORK/bench.err" | head -1)
pct=${line#disagreement }; pct=${pct%\%}
if [ -n "$pct" ] && "$PY" -c "import sys; sys.exit(0 if float('$pct') <= 5.0 else 1)"; then r=ok; else r=no; fi
check "$r" "counter energy vs integrated power within 5% (${pct:-no reading}%)"
grep -q 'run uploaded' "$WORK/bench.err" && r=ok || r=no; check "$r" "run stored by the server at $SERVER"
[ "$AGENT_STATUS" -eq 0 ] && r=ok || r=no; check "$r" "daemon stopped cleanly on SIGTERM (status $AGENT_STATUS)"
if [ -n "$SINK_PID" ]; then
  samples=$("$PY" -c "
import json
n = 0
for line in open('$WORK/received.jsonl'):
    item = json.loads(line)
    if item['path'].endswith('/telemetry'):
        n += sum(1 for s in item['body']['samples'] if s['gpu'] == '$GPU_UUID' and s.get('energy_mj') is not None)
print(n)" 2>/dev/null || echo 0)
  [ "${samples:-0}" -ge $((SECONDS_LOAD / 2)) ] && r=ok || r=no
  check "$r" "daemon telemetry with energy for $GPU_UUID reached the sink ($samples samples)"
fi
agent status "${COMMON[@]}" | sed 's/^/  /'
exit "$failed"
