# runjob's remote watcher: one per cluster connection and log folder (runjob_core/monitor/hub.py).
# Usage: sh -c "$(cat watcher.sh)" runjob-watch MODE ROOT STAT_LOOP_SOURCE
#   MODE  auto | inotify | stat
#   ROOT  the cluster's log folder; jobs write their logs and marker folders under it
# Prints "mode inotify|stat PID" (or "mode none WHY" and exits), then one changed path per
# line. It never runs a scheduler command. It stops when its stdin closes (runjob went away).
mode=$1 root=$2 stat_src=$3
mkdir -p "$root" 2>/dev/null || { echo "mode none cannot create $root"; exit 0; }
if [ "$mode" = auto ]; then
  # inotify only sees writes made on this host: on a network filesystem the job's node
  # writes elsewhere, so there the stat loop is the one that works.
  case "$(stat -f -c %T "$root" 2>/dev/null)" in
    nfs*|lustre|gpfs|beegfs*|cifs|smb*|fuse*|ceph*|panfs|wekafs|afs) mode=stat ;;
    *) if command -v inotifywait >/dev/null 2>&1; then mode=inotify; else mode=stat; fi ;;
  esac
fi
if [ "$mode" = inotify ]; then
  command -v inotifywait >/dev/null 2>&1 || { echo "mode none inotifywait is not installed"; exit 0; }
  exec 3<&0
  # stderr joins stdout: "Watches established." tells runjob the watcher is ready.
  inotifywait -m -r --format '%w%f' -e modify -e close_write -e create -e moved_to "$root" 2>&1 &
  w=$!
  echo "mode inotify $w"
  # runjob closing the channel (stdin EOF) stops inotifywait, which would otherwise live on.
  (cat >/dev/null; kill "$w" 2>/dev/null) <&3 >/dev/null 2>&1 &
  c=$!
  exec 3<&-
  wait "$w"
  kill "$c" 2>/dev/null
  exit 0
fi
if command -v python3 >/dev/null 2>&1; then
  echo "mode stat $$"
  exec python3 -u -c "$stat_src" "$root"
fi
echo "mode none neither inotifywait nor python3 is on the cluster"
