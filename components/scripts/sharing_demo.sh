# GPU sharing demo: one client of a Job whose Pods share one GPU (time-sharing, MPS or time-slicing).
# Prints what this client was given, then runs NVIDIA's vectorAdd sample (a CUDA kernel whose result
# is checked element by element) again and again for SHARING_DEMO_SECONDS, so that all clients use
# the shared GPU at the same time. Exits 0 only if every run passed; non-zero on the first failure.
# Environment: JOB_COMPLETION_INDEX and NODE_NAME (set by the Job), SHARING_DEMO_SECONDS (default
# 60), VECTOR_ADD (default /cuda-samples/vectorAdd, the binary in nvcr.io/nvidia/k8s/cuda-sample).
set -eu

index="${JOB_COMPLETION_INDEX:-0}"
seconds="${SHARING_DEMO_SECONDS:-60}"
vector_add="${VECTOR_ADD:-/cuda-samples/vectorAdd}"
log="${TMPDIR:-/tmp}/vector-add-${index}.log"  # one per client: clients may share a /tmp
# nvidia-smi comes with the driver: GKE mounts it in /usr/local/nvidia/bin, the NVIDIA container
# toolkit in /usr/bin. Appending keeps the image's own PATH first.
PATH="$PATH:/usr/local/nvidia/bin"

echo "client ${index} on node ${NODE_NAME:-unknown}"
# The GPU or MIG slice this client was given, and any MPS limits GKE set for it.
nvidia-smi -L || echo "(nvidia-smi is not available in this container)"
env | grep -E '^(CUDA_MPS_[A-Z_]+|CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES)=' | sort || true

runs=0
end=$(($(date +%s) + seconds))
while [ "$(date +%s)" -lt "$end" ]; do
    if ! "$vector_add" >"$log" 2>&1 || ! grep -q "Test PASSED" "$log"; then
        echo "FAIL: client ${index}: vectorAdd run $((runs + 1)) failed:"
        cat "$log"
        exit 1
    fi
    runs=$((runs + 1))
done
if [ "$runs" -eq 0 ]; then
    echo "FAIL: client ${index}: no vectorAdd run completed in ${seconds} s"
    exit 1
fi
echo "PASS: client ${index} ran vectorAdd ${runs} times in ${seconds} s on the shared GPU"
