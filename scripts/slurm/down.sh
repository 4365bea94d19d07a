#!/usr/bin/env bash
# Stop the single-node cluster that scripts/slurm/up.sh STATE_DIR started, and only that:
# each daemon is found by its pid file in STATE_DIR/pids and killed only if the process with that
# pid is still the program up.sh started (checked in /proc/<pid>/exe), so a reused pid or a
# site's own slurmctld/munged is never touched.
#
#   scripts/slurm/down.sh STATE_DIR [--purge]     (--purge also deletes STATE_DIR)
set -uo pipefail

STATE=${1:?usage: down.sh STATE_DIR [--purge]}
PURGE=${2:-}
[ -d "$STATE/pids" ] || { echo "slurm-down: nothing to stop in $STATE" >&2; exit 0; }

# Reverse start order: jobs' node first, accounting database last.
status=0
for name in slurmd slurmctld slurmdbd mariadbd munged; do
  pidfile="$STATE/pids/$name.pid"
  [ -f "$pidfile" ] || continue
  pid=$(tr -dc '0-9' <"$pidfile")
  if [ -z "$pid" ] || [ ! -d "/proc/$pid" ]; then
    rm -f "$pidfile"
    continue
  fi
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  case "$(basename "${exe% (deleted)}")" in
    "$name" | "$name"-wlm) ;;
    *)
      echo "slurm-down: pid $pid from $pidfile is '$exe', not $name; leaving it alone" >&2
      rm -f "$pidfile"
      continue
      ;;
  esac
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 100); do
    [ -d "/proc/$pid" ] || break
    sleep 0.1
  done
  if [ -d "/proc/$pid" ]; then
    echo "slurm-down: $name ($pid) ignored SIGTERM for 10 s; SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || status=1
  fi
  rm -f "$pidfile"
  echo "slurm-down: stopped $name ($pid)" >&2
done

# Job steps started by our slurmd run as slurmstepd children; with slurmd gone they finish or
# are orphaned. Kill only slurmstepd processes whose environment names our slurm.conf.
for p in /proc/[0-9]*; do
  exe=$(readlink "$p/exe" 2>/dev/null) || continue
  case "$(basename "${exe% (deleted)}")" in slurmstepd | slurmstepd-wlm) ;; *) continue ;; esac
  if tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$STATE/slurm.conf"; then
    kill -KILL "${p#/proc/}" 2>/dev/null && echo "slurm-down: killed leftover slurmstepd ${p#/proc/}" >&2
  fi
done

if [ "$PURGE" = "--purge" ]; then
  rm -rf "$STATE"
fi
exit $status
