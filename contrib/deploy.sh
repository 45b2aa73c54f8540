#!/usr/bin/env bash
# Stop rfetch workers for a deploy the Sidekiq way: TSTP early, TERM late, and allow the
# shutdown timeout + 5 s before KILL.
#
#   contrib/deploy.sh [-t TIMEOUT] [-w SECONDS] PID... [-- DEPLOY_COMMAND...]
#   contrib/deploy.sh [-t TIMEOUT] [-w SECONDS] -u UNIT [-- DEPLOY_COMMAND...]
#
# 1. TSTP to every PID (or to the systemd unit): the workers go quiet, stop fetching and
#    finish their running jobs; they keep running and heartbeating.
# 2. DEPLOY_COMMAND runs (install the new code, migrate, ...); without one, wait -w SECONDS
#    (default 10).
# 3. TERM. PIDs: TERM each, wait up to TIMEOUT + 5 s (TIMEOUT = the workers' -t, default 25)
#    for them to exit, then KILL the ones still alive. Unit: `systemctl stop`, which sends
#    TERM and KILLs after the unit's TimeoutStopSec (checked to be >= TIMEOUT + 5), then
#    `systemctl start` to run the new code (skip it with -n).
# A worker given TERM pushes its unfinished jobs back to their queues and exits 0. A worker
# that had to be KILLed leaves its jobs in its private lists (see docs/guarantees.md).
#
# Exit status: 0 if every worker exited after TERM, 2 if one had to be KILLed, 1 on errors.
set -euo pipefail

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 1
}

timeout=25
quiet_wait=10
unit=""
start_after=1
while getopts "t:w:u:nh" opt; do
  case "$opt" in
    t) timeout=$OPTARG ;;
    w) quiet_wait=$OPTARG ;;
    u) unit=$OPTARG ;;
    n) start_after=0 ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))

pids=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  pids+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
command=("$@")

[[ "$timeout" =~ ^[0-9]+$ ]] || { echo "deploy.sh: -t takes whole seconds" >&2; exit 1; }
[[ "$quiet_wait" =~ ^[0-9]+$ ]] || { echo "deploy.sh: -w takes whole seconds" >&2; exit 1; }
if [ -n "$unit" ] && [ ${#pids[@]} -gt 0 ]; then
  echo "deploy.sh: give PIDs or -u UNIT, not both" >&2
  exit 1
fi
if [ -z "$unit" ] && [ ${#pids[@]} -eq 0 ]; then
  usage
fi
grace=$((timeout + 5))

log() { echo "deploy.sh: $*" >&2; }

alive() {  # a process that exists and is not a zombie
  local state
  kill -0 "$1" 2>/dev/null || return 1
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo "?")
  [ "$state" != "Z" ]
}

deploy_step() {
  if [ ${#command[@]} -gt 0 ]; then
    log "running: ${command[*]}"
    "${command[@]}"
  else
    log "waiting ${quiet_wait} s for running jobs to finish"
    sleep "$quiet_wait"
  fi
}

if [ -n "$unit" ]; then
  stop_usec=$(systemctl show -p TimeoutStopUSec --value "$unit")
  stop_s=$(systemd-analyze timespan "$stop_usec" 2>/dev/null \
    | awk -F': ' '/μs:|us:/ {print int($2 / 1000000); exit}' || true)
  if [ -n "$stop_s" ] && [ "$stop_s" -lt "$grace" ]; then
    log "warning: $unit has TimeoutStopSec=${stop_s}s, below -t + 5 = ${grace}s; systemd may KILL early"
  fi
  log "TSTP -> $unit (quiet)"
  systemctl kill --signal=SIGTSTP "$unit"
  deploy_step
  log "TERM -> $unit (systemctl stop; KILL after TimeoutStopSec)"
  systemctl stop "$unit"
  result=$(systemctl show -p Result --value "$unit")
  if [ "$start_after" -eq 1 ]; then
    log "starting $unit"
    systemctl start "$unit"
  fi
  if [ "$result" = "timeout" ]; then
    log "$unit did not stop within TimeoutStopSec and was KILLed"
    exit 2
  fi
  exit 0
fi

for pid in "${pids[@]}"; do
  [[ "$pid" =~ ^[0-9]+$ ]] || { log "not a PID: $pid"; exit 1; }
  alive "$pid" || { log "no such process: $pid"; exit 1; }
done

log "TSTP -> ${pids[*]} (quiet)"
kill -TSTP "${pids[@]}"
deploy_step

live=()
for pid in "${pids[@]}"; do
  alive "$pid" && live+=("$pid")
done
if [ ${#live[@]} -gt 0 ]; then
  log "TERM -> ${live[*]}; waiting up to ${grace} s (-t ${timeout} + 5)"
  kill -TERM "${live[@]}" 2>/dev/null || true
fi
deadline=$((SECONDS + grace))
while [ $SECONDS -lt $deadline ]; do
  still=()
  for pid in "${live[@]}"; do
    alive "$pid" && still+=("$pid")
  done
  live=("${still[@]}")
  [ ${#live[@]} -eq 0 ] && break
  sleep 0.2
done
if [ ${#live[@]} -gt 0 ]; then
  log "still running after ${grace} s, KILL -> ${live[*]}"
  kill -KILL "${live[@]}" 2>/dev/null || true
  exit 2
fi
log "all workers exited"
