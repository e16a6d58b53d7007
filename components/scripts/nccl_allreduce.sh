#!/usr/bin/env bash
# gke-gpu's multi-node NCCL all-reduce (components/workloads/nccl_allreduce.py): one Pod per node, every GPU of
# its node, Pods of one Indexed Job of a JobSet. Written for gke-gpu; it follows the flow Google's
# GKE NCCL tests document (sshd in every Pod, rank 0 launches nccl-tests over mpirun + ssh), not
# their code.
#
#   nccl_allreduce.sh health   GPU health gate (init container): the node's GPU count and no
#                              uncorrectable volatile ECC errors.
#   nccl_allreduce.sh run      the test: rank 0 runs all_reduce_perf across every rank and judges
#                              the result; the other ranks serve ssh until rank 0 is done.
#
# Sourced with NCCL_ALLREDUCE_LIB=1 it only defines the functions (the offline tests call them).
#
# Settings (environment; the component sets them):
#   JOB_COMPLETION_INDEX            this Pod's rank (set by the Indexed Job)
#   NCCL_ALLREDUCE_NODES            how many Pods (nodes) take part
#   NCCL_ALLREDUCE_GPUS             GPUs per node (one MPI rank each)
#   NCCL_ALLREDUCE_JOBSET, _REPLICATED_JOB, _SUBDOMAIN
#                                   peer i is <jobset>-<replicatedJob>-0-<i>.<subdomain>
#   NCCL_ALLREDUCE_FLOOR_GBPS       the bus bandwidth floor, GB/s
#   NCCL_ALLREDUCE_FLOOR_NOTE       where the floor comes from (printed with the result)
#   NCCL_ALLREDUCE_TESTS_DIR        the image's nccl-tests (MPI build) directory
#   NCCL_ALLREDUCE_MAX_BYTES        the largest message all_reduce_perf sends
#   NCCL_ALLREDUCE_SSHD             shell command that starts the image's sshd
#   NCCL_ALLREDUCE_SETUP            shell line run (in this shell) before NCCL: the flavour's setup
#   NCCL_ALLREDUCE_LAUNCH_PREFIX    command prefix for each rank (e.g. a CPU pinning), may be empty
#   NCCL_ALLREDUCE_DEADLINE_SECONDS the script gives up (and says so) after this long
#   NCCL_ALLREDUCE_PEER_WAIT_SECONDS
#                                   how long rank 0 waits for the other Pods' sshd
#   NCCL_ALLREDUCE_SSH_PORTS        ports to look for the local sshd on (default "222 22")
#   NCCL_ALLREDUCE_POLL_SECONDS     how often the other ranks look for rank 0 (default 10)
#   NCCL_ALLREDUCE_WORKDIR          hostfile, output and the done flag (default /tmp/nccl-allreduce)

set -o pipefail

RESULT_TAG="NCCL-ALLREDUCE RESULT:"
HEALTH_TAG="NCCL-ALLREDUCE GPU HEALTH:"
DONE_FILE="${NCCL_ALLREDUCE_WORKDIR:-/tmp/nccl-allreduce}/done"

log() {
    echo "nccl-allreduce[rank ${JOB_COMPLETION_INDEX:-?}] $(date -u +%H:%M:%S): $*"
}

# nccl_judge FLOOR_GBPS [NOTE] < all_reduce_perf output
#
# Judges nccl-tests' table: the row with the largest size gives the out-of-place bus bandwidth
# (column 8: size count type redop root time algbw busbw #wrong time algbw busbw #wrong). Prints
# one result line and returns 0 only if that bandwidth is at least FLOOR_GBPS, no row counted wrong
# results (#wrong, columns 9 and 13, is a count, or N/A without data checks) and nccl-tests
# reported no out-of-bounds values. No result row, or a row that is not numbers, is a failure.
nccl_judge() {
    local floor="$1" note="${2:-}"
    awk -v floor="$floor" -v note="$note" -v tag="$RESULT_TAG" '
        function number(text) { return text ~ /^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }
        # mpirun --tag-output style prefixes ("[1,0]<stdout>:") are not part of the table.
        { sub(/^.*<stdout>:/, "") }
        /Out of bounds values *:/ {
            line = $0
            sub(/^.*Out of bounds values *: */, "", line)
            split(line, parts, " ")
            if (!number(parts[1])) { malformed = malformed " out-of-bounds line unreadable;" }
            else if (parts[1] + 0 > 0) { out_of_bounds += parts[1] }
            next
        }
        /Using network/ {
            line = $0
            sub(/^.*Using network */, "", line)
            if (!(line in networks)) { networks[line] = 1; network_list = network_list (network_list ? ", " : "") line }
            next
        }
        /^[[:space:]]*#/ { next }
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {
            if (NF < 9 || !number($8)) { malformed = malformed " row for " $1 " bytes unreadable;"; next }
            rows++
            # #wrong of the out-of-place run (column 9) and of the in-place run (column 13).
            for (c = 9; c <= 13 && c <= NF; c += 4) {
                if ($c == "N/A") { continue }
                if ($c !~ /^[0-9]+$/) { malformed = malformed " #wrong of " $1 " bytes unreadable;" }
                else if ($c + 0 > 0) { wrong += $c }
            }
            if (rows == 1 || $1 + 0 >= size + 0) { size = $1; busbw = $8 }
        }
        END {
            where = (note != "" ? "; floor: " note : "")
            nets = (network_list != "" ? "; NCCL network: " network_list : "")
            if (!number(floor)) {
                printf "%s FAIL the floor %s is not a number\n", tag, floor; exit 1
            }
            if (malformed != "") {
                printf "%s FAIL unreadable output:%s\n", tag, malformed; exit 1
            }
            if (rows == 0) {
                printf "%s FAIL no all_reduce_perf result rows in the output%s\n", tag, where; exit 1
            }
            summary = sprintf("out-of-place busbw %s GB/s at %s bytes", busbw, size)
            if (wrong > 0) {
                printf "%s FAIL %d wrong results (%s)%s\n", tag, wrong, summary, where; exit 1
            }
            if (out_of_bounds > 0) {
                printf "%s FAIL %d out-of-bounds values (%s)%s\n", tag, out_of_bounds, summary, where; exit 1
            }
            if (busbw + 0 < floor + 0) {
                printf "%s FAIL %s is below the floor %s GB/s%s%s\n", tag, summary, floor, where, nets; exit 1
            }
            printf "%s PASS %s, floor %s GB/s%s%s\n", tag, summary, floor, where, nets
        }
    '
}

# gpu_health EXPECTED_GPUS: the node's GPUs as nvidia-smi (from GKE's driver mount) sees them.
# Fails unless there are exactly EXPECTED_GPUS and none reports uncorrectable volatile ECC errors;
# a GPU that does not report ECC ([N/A]) passes with a note, any other non-number fails.
gpu_health() {
    local expected="$1" smi="${NVIDIA_SMI:-/usr/local/nvidia/bin/nvidia-smi}" out count bad=0
    if ! out=$("$smi" --query-gpu=index,ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits 2>&1); then
        echo "$HEALTH_TAG FAIL nvidia-smi failed: $out"
        return 1
    fi
    count=$(printf '%s\n' "$out" | grep -c '[^[:space:]]')
    if [ "$count" -ne "$expected" ]; then
        echo "$HEALTH_TAG FAIL $count GPUs visible, expected $expected"
        printf '%s\n' "$out"
        return 1
    fi
    local index ecc
    while IFS=, read -r index ecc; do
        index="${index//[[:space:]]/}"
        ecc="${ecc//[[:space:]]/}"
        [ -n "$index" ] || continue
        case "$ecc" in
            "[N/A]" | "N/A" | "[NotSupported]")
                echo "GPU $index does not report ECC errors (ECC off or not supported)" ;;
            "" | *[!0-9]*)
                echo "$HEALTH_TAG FAIL GPU $index: uncorrectable ECC count unreadable: '$ecc'"
                bad=1 ;;
            *)
                if [ "$ecc" -gt 0 ]; then
                    echo "$HEALTH_TAG FAIL GPU $index has $ecc uncorrectable volatile ECC errors"
                    bad=1
                fi ;;
        esac
    done <<< "$out"
    [ "$bad" -eq 0 ] || return 1
    echo "$HEALTH_TAG PASS $count GPUs, no uncorrectable volatile ECC errors"
}

peer_host() {
    echo "${NCCL_ALLREDUCE_JOBSET}-${NCCL_ALLREDUCE_REPLICATED_JOB}-0-$1.${NCCL_ALLREDUCE_SUBDOMAIN}"
}

# port_open HOST PORT: a TCP connection can be made (bash's /dev/tcp, no extra tools).
port_open() {
    timeout 5 bash -c "exec 3<>/dev/tcp/$1/$2" 2> /dev/null
}

seconds_left() {
    echo $((DEADLINE - SECONDS))
}

# Starts the image's sshd and finds its port (222 in Google's images, else 22).
start_sshd() {
    log "starting sshd: $NCCL_ALLREDUCE_SSHD"
    eval "$NCCL_ALLREDUCE_SSHD" || log "the sshd start command exited $?"
    local waited=0 port
    while [ "$waited" -lt 60 ] && [ "$(seconds_left)" -gt 0 ]; do
        for port in ${NCCL_ALLREDUCE_SSH_PORTS:-222 22}; do
            if port_open 127.0.0.1 "$port"; then
                SSH_PORT="$port"
                log "sshd listens on port $SSH_PORT"
                return 0
            fi
        done
        sleep 2
        waited=$((waited + 2))
    done
    log "sshd is not listening on port ${NCCL_ALLREDUCE_SSH_PORTS:-222 22} after $waited s"
    return 1
}

ssh_to() {
    local host="$1"
    shift
    ssh -q -o LogLevel=ERROR -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
        -o BatchMode=yes -o ConnectTimeout=5 -p "$SSH_PORT" "$host" "$@"
}

# Rank 0: wait for every peer, run all_reduce_perf over all ranks, judge, tell the peers.
run_rank0() {
    local nodes="$NCCL_ALLREDUCE_NODES" gpus="$NCCL_ALLREDUCE_GPUS" i host
    local hosts=() workdir="${DONE_FILE%/*}"
    for ((i = 0; i < nodes; i++)); do hosts+=("$(peer_host "$i")"); done
    local peer_deadline=$((SECONDS + ${NCCL_ALLREDUCE_PEER_WAIT_SECONDS:-1200}))
    for ((i = 1; i < nodes; i++)); do
        until ssh_to "${hosts[$i]}" true; do
            if [ "$SECONDS" -ge "$peer_deadline" ] || [ "$(seconds_left)" -le 0 ]; then
                echo "$RESULT_TAG FAIL rank $i (${hosts[$i]}) did not answer ssh on port $SSH_PORT in time"
                return 1
            fi
            log "waiting for rank $i (${hosts[$i]})"
            sleep 5
        done
        log "rank $i is up"
    done
    # Google's images ship a helper that prepares ssh between the given hosts; use it if present.
    if [ -x /scripts/init_ssh.sh ]; then
        timeout 120 /scripts/init_ssh.sh "${hosts[@]}" < /dev/null || log "/scripts/init_ssh.sh exited $? (124: it took over 120 s)"
    fi
    local hostfile="$workdir/hostfile"
    : > "$hostfile"
    for host in "${hosts[@]}"; do
        echo "$host port=$SSH_PORT slots=$gpus" >> "$hostfile"
    done
    log "hostfile:"
    cat "$hostfile"

    # The flavour's NCCL setup (sources the plugin's environment script), then every NCCL_*
    # variable, the library path and PATH go to every rank: ranks started over ssh do not inherit
    # this container's environment.
    if [ -n "${NCCL_ALLREDUCE_SETUP:-}" ]; then
        log "NCCL setup: $NCCL_ALLREDUCE_SETUP"
        eval "$NCCL_ALLREDUCE_SETUP" || {
            echo "$RESULT_TAG FAIL the NCCL setup '$NCCL_ALLREDUCE_SETUP' failed"
            return 1
        }
    fi
    export NCCL_DEBUG="${NCCL_DEBUG:-INFO}" NCCL_DEBUG_SUBSYS="${NCCL_DEBUG_SUBSYS:-INIT,NET}"
    local exports=() name
    for name in $(compgen -e); do
        case "$name" in
            NCCL_ALLREDUCE_*) ;;
            NCCL_* | LD_LIBRARY_PATH | PATH) exports+=(-x "$name") ;;
        esac
    done
    local prefix=()
    read -r -a prefix <<< "${NCCL_ALLREDUCE_LAUNCH_PREFIX:-}"
    local output="$workdir/all_reduce_perf.txt" remaining
    remaining=$(seconds_left)
    log "running all_reduce_perf on $((nodes * gpus)) ranks ($nodes nodes x $gpus GPUs), up to $remaining s"
    timeout --signal=TERM --kill-after=30 "$remaining" \
        mpirun --allow-run-as-root -np $((nodes * gpus)) --hostfile "$hostfile" \
        --mca btl self,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
        --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1 \
        --mca plm_rsh_agent "ssh -q -o LogLevel=ERROR -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p $SSH_PORT" \
        --bind-to none "${exports[@]}" \
        "${prefix[@]}" "$NCCL_ALLREDUCE_TESTS_DIR/all_reduce_perf" \
        -b 1K -e "$NCCL_ALLREDUCE_MAX_BYTES" -f 2 -g 1 -w 5 -n 20 -c 1 2>&1 | tee "$output"
    local launched=$?
    local verdict=0
    if [ "$launched" -ne 0 ]; then
        # One result line, and never a PASS judged on a sweep cut short.
        echo "$RESULT_TAG FAIL mpirun exited $launched (124: the script's deadline)"
        verdict=1
    else
        nccl_judge "$NCCL_ALLREDUCE_FLOOR_GBPS" "${NCCL_ALLREDUCE_FLOOR_NOTE:-}" < "$output" || verdict=1
    fi
    for ((i = 1; i < nodes; i++)); do
        ssh_to "${hosts[$i]}" "mkdir -p '$workdir' && echo $verdict > '$DONE_FILE'" \
            || log "could not tell rank $i that the test is over"
    done
    return "$verdict"
}

# Other ranks: serve ssh until rank 0 says it is done (or is gone, or the deadline passes).
run_peer() {
    local rank0 seen=0 missing=0
    rank0="$(peer_host 0)"
    while [ "$(seconds_left)" -gt 0 ]; do
        if [ -f "$DONE_FILE" ]; then
            log "rank 0 is done (its verdict: $(cat "$DONE_FILE"))"
            return 0
        fi
        if port_open "$rank0" "$SSH_PORT"; then
            seen=1
            missing=0
        elif [ "$seen" -eq 1 ]; then
            missing=$((missing + 1))
            if [ "$missing" -ge 6 ]; then
                log "rank 0 ($rank0) is gone without a result"
                return 1
            fi
        fi
        sleep "${NCCL_ALLREDUCE_POLL_SECONDS:-10}"
    done
    log "deadline reached before rank 0 finished"
    return 1
}

main() {
    DEADLINE=$((SECONDS + ${NCCL_ALLREDUCE_DEADLINE_SECONDS:-3300}))
    case "${1:-}" in
        health)
            gpu_health "${NCCL_ALLREDUCE_GPUS:?}"
            ;;
        run)
            : "${JOB_COMPLETION_INDEX:?}" "${NCCL_ALLREDUCE_NODES:?}" "${NCCL_ALLREDUCE_GPUS:?}"
            mkdir -p "${DONE_FILE%/*}"
            # The images keep their libraries in ld.so.conf; refresh the cache as Google's flow does.
            if [ -x /sbin/ldconfig ]; then /sbin/ldconfig 2> /dev/null || true; fi
            start_sshd || { echo "$RESULT_TAG FAIL sshd did not start on rank $JOB_COMPLETION_INDEX"; return 1; }
            if [ "$JOB_COMPLETION_INDEX" -eq 0 ]; then
                run_rank0
            else
                run_peer
            fi
            ;;
        *)
            echo "usage: nccl_allreduce.sh health|run" >&2
            return 2
            ;;
    esac
}

if [ "${NCCL_ALLREDUCE_LIB:-0}" != 1 ]; then
    main "$@"
    exit $?
fi
