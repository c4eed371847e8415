#!/usr/bin/env bash
# test-cluster.sh — a real local SLURM 22.05 cluster (+ slurmdbd/MariaDB) and a key-only sshd on THIS
# Debian 12 machine, for runjob's "slurm" test tier. Needs root. Follows the verified recipe in the
# shared research notes (local-slurm-recipe.md); read its gotchas before changing anything here.
#
#   scripts/test-cluster.sh up      install packages if missing, start whatever is not running, smoke-test
#   scripts/test-cluster.sh down    stop the daemons THIS script started (by pid), remove stale pidfiles
#   scripts/test-cluster.sh status  one line per component; exit 0 only if all are up
#   scripts/test-cluster.sh env     print $RUNJOB_TEST_DIR/cluster.env (what the test suite reads)
#   scripts/test-cluster.sh restart slurmctld|sshd   stop and start one daemon at once (the chaos tests)
#
# Exit codes: 0 ok, 1 failure, 2 usage, 3 "cannot run here" (not root / no apt): the test suite skips
# the SLURM tier on 3 (but never on CI).
#
# Layout: one host, nodes cpu01 + gpu01 (both NodeAddr=127.0.0.1, slurmd ports 6818/6820), partitions
# debug (default, cpu01), gpu (gpu01, fake Gres=gpu:h100:2, MaxTime=60), maint (State=DOWN), multi (both
# nodes, MaxTime=60; cpu01 and gpu01 resolve to 127.0.0.1 through /etc/hosts, for MASTER_ADDR);
# slurmctld 6817, slurmdbd 6819, MariaDB on its unix socket, sshd 127.0.0.1:2222; PostgreSQL (team mode)
# on 127.0.0.1:5433, role and database runjob_test, its password only in $RUNJOB_TEST_DIR/pgpass.
set -euo pipefail

STATE_DIR=${RUNJOB_TEST_DIR:-/var/lib/runjob-test}
PID_DIR=$STATE_DIR/pids            # pids of the daemons this script started (what `down` stops)
ENV_FILE=$STATE_DIR/cluster.env
KEY=$STATE_DIR/id_ed25519
KNOWN_HOSTS=$STATE_DIR/known_hosts
APT_LOG=$STATE_DIR/apt.log
SSH_PORT=2222
TEST_USER=rjuser
SCRATCH=/home/$TEST_USER/scratch
DB_PASS=slurmdbpass
SSHD_CONFIG=/etc/ssh/sshd_runjob_config
# inotify-tools: the push path's watcher (inotifywait) on the cluster side (runjob_core/monitor/hub.py).
# postgresql: the shared state of team mode (issue 27), a server of our own on 127.0.0.1:$PG_PORT.
PKGS=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server openssh-server chromium chromium-driver inotify-tools
      postgresql)
COMPONENTS=(munged mariadb slurmdbd slurmctld slurmd-cpu01 slurmd-gpu01 sshd postgres)
PG_PORT=5433
PG_DIR=$STATE_DIR/postgres         # data folder and unix socket of the test server (owned by postgres)
PG_PASSFILE=$STATE_DIR/pgpass      # the test role's password, in libpq's passfile format (0600)

# ------------------------------------------------------------------ helpers
T_START=$(date +%s%N)
elapsed() { local ms=$(( ($(date +%s%N) - T_START) / 1000000 )); printf '%d.%d' $((ms / 1000)) $(((ms % 1000) / 100)); }
log() { printf '[%6ss] %s\n' "$(elapsed)" "$*"; }
die() { log "FATAL: $*" >&2; exit 1; }
# exit 3 = this machine cannot host the cluster; one clear line on stderr
unavailable() { echo "test-cluster.sh: cannot run here: $*" >&2; exit 3; }

wait_for() { # wait_for SECONDS CMD...: poll every 0.2 s; returns 1 on timeout
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
must_wait() { # must_wait SECONDS DESCRIPTION CMD...: like wait_for, but dies on timeout
  local secs=$1 what=$2; shift 2
  wait_for "$secs" "$@" || die "timed out after ${secs}s waiting for: $what"
}

# Where each daemon writes its own pidfile (configured below) and its process name (/proc/PID/comm),
# used to make sure a recorded pid was not reused by some other process.
pidfile_of() {
  case $1 in
    munged) echo /run/munge/munged.pid ;;
    mariadb) echo /run/mysqld/mysqld.pid ;;
    slurmdbd) echo /run/slurmdbd.pid ;;
    slurmctld) echo /run/slurmctld.pid ;;
    slurmd-cpu01) echo /run/slurmd-cpu01.pid ;;
    slurmd-gpu01) echo /run/slurmd-gpu01.pid ;;
    sshd) echo /run/sshd-runjob.pid ;;
    postgres) echo "$PG_DIR/data/postmaster.pid" ;;
  esac
}
comm_of() { case $1 in mariadb) echo mariadbd ;; slurmd-*) echo slurmd ;; *) echo "$1" ;; esac; }

# pid_alive PID NAME: the process exists and is the expected program. /proc instead of `kill -0`
# alone, so that `status` also works for non-root users (kill -0 on a root daemon gives EPERM).
pid_alive() {
  [[ $1 =~ ^[0-9]+$ ]] && [ -r "/proc/$1/comm" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$(comm_of "$2")" ] \
    && { [ "$(id -u)" != 0 ] || kill -0 "$1" 2>/dev/null; } || return 1
  # A zombie counts as dead: the daemons are reparented to PID 1, which may reap them late
  # (here seconds late), and a zombie still passes kill -0 and keeps its comm.
  local stat; stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}
daemon_pid() { # pid from the daemon's own pidfile if that process is alive, else nothing
  local f; f=$(pidfile_of "$1")
  [ -s "$f" ] || return 1
  local pid; pid=$(head -n 1 "$f" | tr -dc 0-9)  # postmaster.pid: the pid is its first line of several
  pid_alive "$pid" "$1" && echo "$pid"
}

tcp_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
# Functional checks, one per component (liveness of the pid is checked separately).
works() {
  case $1 in
    munged) munge -n 2>/dev/null | unmunge >/dev/null 2>&1 ;;
    mariadb) timeout 5 mysqladmin --connect-timeout=2 ping >/dev/null 2>&1 ;;
    slurmdbd) timeout 10 sacctmgr -n list cluster >/dev/null 2>&1 ;;
    slurmctld) timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' ;;
    slurmd-cpu01) tcp_open 6818 ;;
    slurmd-gpu01) tcp_open 6820 ;;
    sshd) [ "$(timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$SSH_PORT; head -c 7 <&3" 2>/dev/null)" = SSH-2.0 ] ;;
    postgres) timeout 5 "$(pg_bin)/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" ;;
  esac
}
healthy() { daemon_pid "$1" >/dev/null && works "$1"; }

record_pid() { # remember that WE started this daemon
  local pid; pid=$(daemon_pid "$1") || die "$1 started but its pidfile $(pidfile_of "$1") has no live pid"
  echo "$pid" > "$PID_DIR/$1.pid"
}

# stop_ours NAME: stop the daemon only if we recorded it and the pid is still that program.
stop_ours() {
  local name=$1 f=$PID_DIR/$1.pid pid
  [ -s "$f" ] || return 0
  pid=$(tr -dc 0-9 < "$f")
  if pid_alive "$pid" "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 75); do pid_alive "$pid" "$name" || break; sleep 0.2; done
    if pid_alive "$pid" "$name"; then log "$name (pid $pid) ignored SIGTERM for 15 s, sending SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$f"
}

# write_file PATH MODE OWNER < content: only touches PATH if the content differs; sets CHANGED=1 then.
write_file() {
  local path=$1 mode=$2 owner=$3 tmp
  tmp=$(mktemp "$path.XXXXXX")
  cat > "$tmp"
  if [ -e "$path" ] && cmp -s "$tmp" "$path"; then rm -f "$tmp"; else mv -f "$tmp" "$path"; CHANGED=1; fi
  chmod "$mode" "$path"; chown "$owner" "$path"
}

need_root() {
  [ "$(id -u)" = 0 ] || unavailable "must run as root (uid is $(id -u)): it installs packages and starts system daemons"
}

# ------------------------------------------------------------------ status / env
cmd_status() {
  local c pid all=0
  for c in "${COMPONENTS[@]}"; do
    if pid=$(daemon_pid "$c") && works "$c"; then
      printf '%-13s up    pid %s\n' "$c" "$pid"
    else
      printf '%-13s down  %s\n' "$c" "${pid:+pid $pid alive but not answering}"
      all=1
    fi
  done
  return $all
}

cmd_env() {
  [ -r "$ENV_FILE" ] || { echo "test-cluster.sh: $ENV_FILE not found (run: scripts/test-cluster.sh up)" >&2; exit 1; }
  cat "$ENV_FILE"
}

# ------------------------------------------------------------------ down
cmd_down() {
  need_root
  local c pid f
  # Cancel jobs first, so no slurmstepd of ours outlives its slurmd (only if the controller is ours).
  if [ -s "$PID_DIR/slurmctld.pid" ] && healthy slurmctld; then
    local jobs; jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ') || true
    if [ -n "${jobs// /}" ]; then
      log "cancelling jobs: $jobs"
      # shellcheck disable=SC2086
      timeout 10 scancel $jobs 2>/dev/null || true
      for _ in $(seq 1 75); do [ -z "$(timeout 5 squeue -h -t R,CG -o %A 2>/dev/null)" ] && break; sleep 0.2; done
    fi
  fi
  # Reverse start order: clients of a daemon go before it (fewer spurious errors in the logs).
  for c in postgres sshd slurmd-gpu01 slurmd-cpu01 slurmctld slurmdbd mariadb munged; do stop_ours "$c"; done
  # Daemons running that we did not start are left alone, but say so.
  for c in "${COMPONENTS[@]}"; do
    pid=$(daemon_pid "$c") && log "left running (not started by this script): $c pid $pid"
  done
  # Stale pidfiles: a stale /run/slurmctld.pid makes a later `apt-get purge slurmctld` fail in prerm.
  for c in "${COMPONENTS[@]}"; do
    f=$(pidfile_of "$c")
    if [ -e "$f" ] && ! daemon_pid "$c" >/dev/null; then rm -f "$f"; fi
  done
  log "down"
}

# ------------------------------------------------------------------ up
pg_bin() { # the newest installed server's bin folder (Debian keeps each major version apart)
  local d; d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] || die "no PostgreSQL server under /usr/lib/postgresql (package postgresql)"
  echo "$d"
}

# PostgreSQL for team mode: its own cluster in $PG_DIR on 127.0.0.1:$PG_PORT (not Debian's 5432 one),
# a role runjob_test with a password (scram) kept only in $PG_PASSFILE, and a database runjob_test.
setup_postgres() {
  local bin pass; bin=$(pg_bin)
  if [ ! -s "$PG_DIR/data/PG_VERSION" ]; then
    install -d -o postgres -g postgres -m 0700 "$PG_DIR"
    runuser -u postgres -- "$bin/initdb" -D "$PG_DIR/data" -U postgres -E UTF8 --auth-local=peer \
      --auth-host=scram-sha-256 >"$STATE_DIR/initdb.log" 2>&1 || { tail -n 20 "$STATE_DIR/initdb.log" >&2; die "initdb failed"; }
    log "postgres: cluster created in $PG_DIR/data"
  fi
  if healthy postgres; then
    log "postgres already running (pid $(daemon_pid postgres))"
  else
    runuser -u postgres -- "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 \
      -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $PG_DIR" start >/dev/null \
      || { tail -n 20 "$PG_DIR/server.log" >&2; die "postgres did not start (log: $PG_DIR/server.log)"; }
    must_wait 20 postgres healthy postgres; record_pid postgres
    log "postgres started on 127.0.0.1:$PG_PORT (pid $(daemon_pid postgres))"
  fi
  if [ ! -s "$PG_PASSFILE" ]; then
    pass=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
    (umask 077; echo "127.0.0.1:$PG_PORT:*:runjob_test:$pass" > "$PG_PASSFILE")
  fi
  pass=$(cut -d: -f5 "$PG_PASSFILE")
  # On stdin, not in argv: the password never shows in the process list.
  runuser -u postgres -- "$bin/psql" -h "$PG_DIR" -p "$PG_PORT" -U postgres -d postgres -q -v ON_ERROR_STOP=1 >/dev/null <<SQL \
    || die "postgres: could not set up role and database runjob_test"
SELECT 'CREATE ROLE runjob_test LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'runjob_test')\\gexec
ALTER ROLE runjob_test PASSWORD '$pass';
SELECT 'CREATE DATABASE runjob_test OWNER runjob_test' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'runjob_test')\\gexec
SQL
  PGPASSFILE=$PG_PASSFILE timeout 10 "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U runjob_test -d runjob_test -qAtc 'SELECT 1' \
    >/dev/null || die "postgres: runjob_test cannot log in over TCP with its password"
  log "postgres: role and database runjob_test ready"
}

install_packages() {
  command -v dpkg-query >/dev/null 2>&1 || unavailable "dpkg-query not found (needs Debian 12 with apt)"
  local p missing=()
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "packages already installed"; return; fi
  command -v apt-get >/dev/null 2>&1 || unavailable "apt-get not found, cannot install: ${missing[*]}"
  log "apt-get install ${missing[*]} (log: $APT_LOG)"
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d exit 101 = "don't start services": postinst must not start daemons, we do that ourselves
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  : > "$APT_LOG"
  if ! { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } >>"$APT_LOG" 2>&1; then
    echo "---- last lines of $APT_LOG ----" >&2; tail -n 30 "$APT_LOG" >&2
    die "apt-get failed"
  fi
  rm -f /usr/sbin/policy-rc.d; trap - EXIT
  log "packages installed"
}

setup_user() {
  id "$TEST_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$TEST_USER"
  # '*' = no password but NOT locked: useradd's '!' makes sshd (UsePAM no) refuse even a valid key
  usermod -p '*' "$TEST_USER"
  install -d -o "$TEST_USER" -g "$(id -gn "$TEST_USER")" -m 0755 "$SCRATCH"
}

detect_cgroup() {
  # task/cgroup only where the cgroup v1 memory controller is usable (real OUT_OF_MEMORY); otherwise
  # fall back to linuxproc + OverMemoryKill (jobs over --mem end FAILED 0:9). cgroup v2 is untested.
  CGROUP=no
  rmdir /sys/fs/cgroup/memory/runjob_probe 2>/dev/null || true   # left by an interrupted run
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] && [ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ] \
     && mkdir /sys/fs/cgroup/memory/runjob_probe 2>/dev/null; then
    rmdir /sys/fs/cgroup/memory/runjob_probe; CGROUP=yes
  fi
  if [ "$CGROUP" = yes ]; then PROCTRACK=proctrack/cgroup; TASKPLUGIN=task/cgroup; OVERMEM=NoOverMemoryKill
  else PROCTRACK=proctrack/linuxproc; TASKPLUGIN=task/none; OVERMEM=OverMemoryKill; fi
}

write_slurm_configs() {
  CHANGED=0
  write_file /etc/slurm/slurm.conf 0644 root:root <<EOF
# generated by runjob scripts/test-cluster.sh — local test cluster, do not edit by hand
ClusterName=runjob
SlurmctldHost=localhost
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued job is eligible again after cred_expire seconds (default 120)
AuthInfo=cred_expire=10
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
# two slurmd on one host: %n (node name) keeps their spool dirs, pidfiles and logs apart
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=$(pidfile_of slurmctld)
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# otherwise "error: Configured MailProg is invalid"
MailProg=/bin/true
MpiDefault=none
ProctrackType=$PROCTRACK
TaskPlugin=$TASKPLUGIN
ReturnToService=2
SchedulerType=sched/backfill
# schedule at once (defaults sched_interval=60, bf_interval=30): submit -> COMPLETED in < 1 s
SchedulerParameters=sched_interval=5,bf_interval=5,batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# the nodes are declared bigger than this VM on purpose
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=$OVERMEM
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
# associations: --account=bogus is rejected at submission; qos "single" limits are applied
AccountingStorageEnforce=associations,limits,qos
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
KillWait=5
# finished jobs stay visible to scontrol / squeue -t all for 10 min
MinJobAge=600
# every task of an array counts, and cancelled ones stay for MinJobAge: the 1,000-element
# sweep benches (bench/bench_sweep.py) queue ~10 arrays in a few minutes (10,000 refused them)
MaxJobCount=50000
InactiveLimit=0
Waittime=0
GresTypes=gpu
# not "localhost": with two nodes a node called localhost matches every lookup (Duplicated NodeHostName)
NodeName=cpu01 NodeHostname=cpu01 NodeAddr=127.0.0.1 Port=6818 CPUs=32 Boards=1 SocketsPerBoard=1 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=16000 State=UNKNOWN
NodeName=gpu01 NodeHostname=gpu01 NodeAddr=127.0.0.1 Port=6820 CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:h100:2 State=UNKNOWN
# one node per partition: a shared node let pending GPU jobs block unrelated debug jobs
PartitionName=debug Nodes=cpu01       Default=YES MaxTime=INFINITE DefMemPerCPU=500 State=UP
PartitionName=gpu   Nodes=gpu01       Default=NO  MaxTime=60       DefMemPerCPU=500 State=UP
PartitionName=maint Nodes=cpu01,gpu01 Default=NO  MaxTime=INFINITE DefMemPerCPU=500 State=DOWN
# both nodes, for multi-node jobs (srun across cpu01 + gpu01, a rendezvous on MASTER_ADDR)
PartitionName=multi Nodes=cpu01,gpu01 Default=NO  MaxTime=60       DefMemPerCPU=500 State=UP
EOF
  # File= must be char devices: plain files give an empty CUDA_VISIBLE_DEVICES (mknod'ed below)
  write_file /etc/slurm/gres.conf 0644 root:root <<'EOF'
AutoDetect=off
NodeName=gpu01 Name=gpu Type=h100 File=/dev/fakegpu[0-1]
EOF
  if [ "$CGROUP" = yes ]; then
    # ConstrainCores must stay "no": the nodes declare 32/8 CPUs that do not exist
    write_file /etc/slurm/cgroup.conf 0644 root:root <<'EOF'
CgroupPlugin=cgroup/v1
CgroupAutomount=no
ConstrainCores=no
ConstrainDevices=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedRAMSpace=100
AllowedSwapSpace=0
EOF
  elif [ -e /etc/slurm/cgroup.conf ]; then rm -f /etc/slurm/cgroup.conf; CHANGED=1; fi
  write_file /etc/slurm/slurmdbd.conf 0600 slurm:slurm <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=slurm
DebugLevel=info
LogFile=/var/log/slurm/slurmdbd.log
PidFile=$(pidfile_of slurmdbd)
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
}

associations_ok() {
  # the last two steps of setup_associations; if they are there, the rest is too
  sacctmgr -n -P list assoc where cluster=runjob user="$TEST_USER" account=other format=account 2>/dev/null | grep -qx other \
    && sacctmgr -n -P list assoc where cluster=runjob account=research user="$TEST_USER" format=qos 2>/dev/null | grep -q single
}
setup_associations() {
  # sacctmgr exits 1 on "Nothing new added", so each step tolerates "already there"
  local cmd
  while read -r cmd; do
    [ -n "$cmd" ] || continue
    # shellcheck disable=SC2086
    sacctmgr -i $cmd >/dev/null 2>&1 || true
  done <<EOF
add cluster runjob
add account research Description=research Organization=runjob
add account other Description=other Organization=runjob
add user root DefaultAccount=research Account=research
modify user root set DefaultAccount=research
add user $TEST_USER DefaultAccount=research Account=research
add user $TEST_USER Account=other
add qos single MaxJobsPerUser=1
modify account research set qos+=single
EOF
  associations_ok || die "sacctmgr did not create the associations (see /var/log/slurm/slurmdbd.log)"
}

nodes_ok() { # both nodes answer and are usable (jobs of other tests may keep them mixed/allocated)
  local out; out=$(timeout 10 sinfo -h -N -n cpu01,gpu01 -o '%N %T' 2>/dev/null | sort -u)
  [ "$(grep -cE ' (idle|mixed|allocated|completing)$' <<<"$out")" = 2 ]
}

setup_sshd_files() {
  install -d -m 0755 /run/sshd   # sshd refuses to start without its privsep dir
  [ -s /etc/ssh/ssh_host_ed25519_key ] && [ -s /etc/ssh/ssh_host_rsa_key ] || ssh-keygen -A >/dev/null
  CHANGED=0
  # a separate config file: Debian's own sshd_config (port 22) is left alone. Only ed25519+rsa host
  # keys, so that whatever key type a client negotiates is in our known_hosts.
  write_file "$SSHD_CONFIG" 0644 root:root <<EOF
# runjob test sshd (scripts/test-cluster.sh): loopback only, non-standard port, key-only
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey /etc/ssh/ssh_host_ed25519_key
HostKey /etc/ssh/ssh_host_rsa_key
PidFile $(pidfile_of sshd)
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes yes
PrintMotd no
Subsystem sftp internal-sftp
LogLevel VERBOSE
MaxStartups 50:30:100
MaxSessions 50
EOF
  SSHD_CHANGED=$CHANGED
  /usr/sbin/sshd -t -f "$SSHD_CONFIG" || die "sshd -t rejected $SSHD_CONFIG"

  [ -s "$KEY" ] || ssh-keygen -q -t ed25519 -N '' -C runjob-test -f "$KEY"
  local u h g pub; pub=$(cut -d' ' -f1,2 "$KEY.pub")
  for u in root "$TEST_USER"; do
    h=$(getent passwd "$u" | cut -d: -f6); g=$(id -gn "$u")
    install -d -m 0700 -o "$u" -g "$g" "$h/.ssh"
    touch "$h/.ssh/authorized_keys"
    grep -qF "$pub" "$h/.ssh/authorized_keys" || cat "$KEY.pub" >> "$h/.ssh/authorized_keys"
    chown "$u:$g" "$h/.ssh/authorized_keys"; chmod 0600 "$h/.ssh/authorized_keys"
  done
  # known_hosts straight from the host key files (no ssh-keyscan / TOFU); port != 22 => "[host]:port"
  local hst t
  for hst in "[127.0.0.1]:$SSH_PORT" "[localhost]:$SSH_PORT"; do
    for t in ed25519 rsa; do echo "$hst $(cut -d' ' -f1,2 /etc/ssh/ssh_host_${t}_key.pub)"; done
  done | write_file "$KNOWN_HOSTS" 0644 root:root
}

ssh_ok() { # ssh_ok USER: the exact check the tests' transport depends on
  ssh -p "$SSH_PORT" -i "$KEY" -o UserKnownHostsFile="$KNOWN_HOSTS" -o StrictHostKeyChecking=yes \
      -o BatchMode=yes -o ConnectTimeout=5 "$1@127.0.0.1" 'squeue -u $USER >/dev/null'
}

smoke_test() {
  local j1 j2 j
  j1=$(cd / && sbatch --parsable -o /dev/null -J rj-smoke --wrap true) || die "smoke sbatch (debug) failed"
  j2=$(cd / && sbatch --parsable -o /dev/null -J rj-smoke-gpu -p gpu --gres=gpu:h100:1 --wrap true) \
    || die "smoke sbatch (gpu) failed"
  jobs_done() { for j in "$j1" "$j2"; do scontrol -o show job "$j" | grep -q 'JobState=COMPLETED ' || return 1; done; }
  if ! wait_for 60 jobs_done; then
    for j in "$j1" "$j2"; do scontrol -o show job "$j" | grep -oE 'JobId=[0-9]+|JobState=[A-Z_]+|Reason=[^ ]+' | tr '\n' ' ' >&2; echo >&2; done
    die "smoke jobs $j1,$j2 did not reach COMPLETED in 60 s"
  fi
  log "smoke jobs $j1 (debug) and $j2 (gpu, gres h100:1) COMPLETED"
}

cmd_up() {
  need_root
  install -d -m 0755 "$STATE_DIR"; install -d -m 0700 "$PID_DIR"
  install_packages
  setup_user

  # Fresh start = none of the cluster daemons is alive: only then are slurmctld state and the
  # accounting DB wiped (job ids restart at 1). A healthy or half-running cluster keeps its state.
  local c fresh=1
  for c in munged mariadb slurmdbd slurmctld slurmd-cpu01 slurmd-gpu01; do
    daemon_pid "$c" >/dev/null && fresh=0
  done
  # our recorded pids whose process is gone are stale
  for c in "${COMPONENTS[@]}"; do
    [ -s "$PID_DIR/$c.pid" ] && ! pid_alive "$(tr -dc 0-9 < "$PID_DIR/$c.pid")" "$c" && rm -f "$PID_DIR/$c.pid"
  done

  # --- munge (its postinst created munge.key and the munge/slurm/mysql users)
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  fi
  if healthy munged; then log "munged already running (pid $(daemon_pid munged))"
  else
    runuser -u munge -- /usr/sbin/munged </dev/null >/dev/null 2>&1
    must_wait 10 munged healthy munged; record_pid munged
    log "munged started (pid $(daemon_pid munged))"
  fi

  # --- dirs, fake GPUs, cgroup mode, config files
  install -d -o slurm -g slurm -m 0755 /var/spool/slurmctld /var/log/slurm
  if [ "$fresh" = 1 ]; then
    log "fresh start: wiping slurmctld state, slurmd spools, jobcomp log and (below) the accounting DB"
    rm -rf /var/spool/slurmctld/* /var/spool/slurmd
    rm -f /var/log/slurm/jobcomp.log
  fi
  install -d -m 0755 /var/spool/slurmd /var/spool/slurmd/cpu01 /var/spool/slurmd/gpu01
  # jobcomp/filetxt opens this file O_WRONLY|O_APPEND even for `sacct -c`: users need write access
  [ -e /var/log/slurm/jobcomp.log ] || install -o slurm -g slurm -m 0666 /dev/null /var/log/slurm/jobcomp.log
  chmod 0666 /var/log/slurm/jobcomp.log
  local i
  for i in 0 1; do [ -c /dev/fakegpu$i ] || { rm -f /dev/fakegpu$i; mknod /dev/fakegpu$i c 1 3; }; done
  detect_cgroup
  log "cgroup enforcement: $CGROUP ($PROCTRACK, $TASKPLUGIN, $OVERMEM)"
  write_slurm_configs
  RECONFIGURE=0
  if [ "$CHANGED" = 1 ] && [ "$fresh" = 0 ]; then
    if healthy slurmctld && healthy slurmdbd; then
      # running daemons re-read a changed slurm.conf/gres.conf on `scontrol reconfigure` (below, once
      # slurmctld is checked): running jobs and the other daemons are left alone
      RECONFIGURE=1
    else
      # half-running: restart the ones we own
      log "slurm config changed: restarting our slurm daemons"
      for c in slurmd-gpu01 slurmd-cpu01 slurmctld slurmdbd; do stop_ours "$c"; done
    fi
  fi
  # the node names resolve (MASTER_ADDR of a multi-node job is the first node's host name)
  grep -qE '^127\.0\.0\.1[[:space:]].*\bcpu01\b.*\bgpu01\b' /etc/hosts \
    || echo '127.0.0.1 cpu01 gpu01   # runjob test cluster (scripts/test-cluster.sh)' >> /etc/hosts

  # --- MariaDB, started directly (not via mysqld_safe) so that the pid we record is the server itself
  install -d -o mysql -g mysql -m 0755 /run/mysqld
  if healthy mariadb; then log "mariadb already running (pid $(daemon_pid mariadb))"
  else
    setsid /usr/sbin/mariadbd --user=mysql --pid-file="$(pidfile_of mariadb)" --socket=/run/mysqld/mysqld.sock \
      </dev/null >>/var/log/runjob-mariadb.log 2>&1 &
    must_wait 60 mariadb healthy mariadb; record_pid mariadb
    log "mariadb started (pid $(daemon_pid mariadb))"
  fi
  [ "$fresh" = 1 ] && mysql -e "DROP DATABASE IF EXISTS slurm_acct_db"
  mysql -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

  # --- slurmdbd + associations (before slurmctld, so enforcement has its data from the start)
  if healthy slurmdbd; then log "slurmdbd already running (pid $(daemon_pid slurmdbd))"
  else
    /usr/sbin/slurmdbd </dev/null >/dev/null 2>&1
    must_wait 60 slurmdbd healthy slurmdbd; record_pid slurmdbd
    log "slurmdbd started (pid $(daemon_pid slurmdbd))"
  fi
  if associations_ok; then log "associations present"
  else setup_associations; log "associations created (cluster runjob; accounts research, other; qos single)"; fi

  # --- slurmctld + the two slurmd
  if healthy slurmctld; then log "slurmctld already running (pid $(daemon_pid slurmctld))"
  else
    /usr/sbin/slurmctld </dev/null >/dev/null 2>&1
    must_wait 30 slurmctld healthy slurmctld; record_pid slurmctld
    log "slurmctld started (pid $(daemon_pid slurmctld))"
  fi
  if [ "$RECONFIGURE" = 1 ]; then
    scontrol reconfigure || die "scontrol reconfigure failed after the slurm config changed"
    log "slurm config changed: scontrol reconfigure (running jobs untouched)"
  fi
  for c in cpu01 gpu01; do
    if healthy "slurmd-$c"; then log "slurmd $c already running (pid $(daemon_pid "slurmd-$c"))"
    else
      /usr/sbin/slurmd -N "$c" </dev/null >/dev/null 2>&1
      must_wait 30 "slurmd $c" healthy "slurmd-$c"; record_pid "slurmd-$c"
      log "slurmd $c started (pid $(daemon_pid "slurmd-$c"))"
    fi
  done
  if ! wait_for 30 nodes_ok; then
    # e.g. INVAL/DRAIN left by an earlier bad config
    log "nodes not usable: $(sinfo -h -N -o '%N %T %E' | sort -u | tr '\n' ';'); resuming them"
    scontrol update nodename=cpu01,gpu01 state=resume || true
    must_wait 30 "nodes up after resume" nodes_ok
  fi
  log "nodes cpu01 + gpu01 up"
  smoke_test

  # --- sshd on 127.0.0.1:$SSH_PORT, key-only
  setup_sshd_files
  if healthy sshd; then
    if [ "$SSHD_CHANGED" = 1 ] && [ -s "$PID_DIR/sshd.pid" ]; then
      kill -HUP "$(daemon_pid sshd)"; sleep 0.5   # SIGHUP: sshd re-execs itself with the new config
      log "sshd config changed: reloaded"
    fi
    log "sshd already running (pid $(daemon_pid sshd))"
  else
    /usr/sbin/sshd -f "$SSHD_CONFIG" -E /var/log/sshd-runjob.log </dev/null >/dev/null 2>&1
    must_wait 20 sshd healthy sshd; record_pid sshd
    log "sshd started on 127.0.0.1:$SSH_PORT (pid $(daemon_pid sshd))"
  fi
  must_wait 20 "ssh $TEST_USER@127.0.0.1:$SSH_PORT squeue" ssh_ok "$TEST_USER"
  must_wait 20 "ssh root@127.0.0.1:$SSH_PORT squeue" ssh_ok root
  log "ssh as $TEST_USER and root works"
  setup_postgres

  # --- what the test suite reads
  CHANGED=0
  write_file "$ENV_FILE" 0644 root:root <<EOF
RUNJOB_TEST_SSH_HOST=127.0.0.1
RUNJOB_TEST_SSH_PORT=$SSH_PORT
RUNJOB_TEST_SSH_USER=$TEST_USER
RUNJOB_TEST_SSH_KEY=$KEY
RUNJOB_TEST_KNOWN_HOSTS=$KNOWN_HOSTS
RUNJOB_TEST_SCRATCH=$SCRATCH
RUNJOB_TEST_ACCOUNT=research
RUNJOB_TEST_CGROUP=$CGROUP
RUNJOB_TEST_PG_URL=postgresql://runjob_test@127.0.0.1:$PG_PORT/runjob_test
RUNJOB_TEST_PGPASSFILE=$PG_PASSFILE
EOF
  log "ALL UP in $(elapsed)s; test settings in $ENV_FILE"
}

# ------------------------------------------------------------------ restart (chaos tests)
# restart slurmctld|sshd: stop the running daemon and start it again at once, as an admin's restart
# would. slurmctld keeps its jobs (StateSaveLocation) and slurmd keeps running them; sshd's open
# sessions survive. The daemon is away for a second or two; everyone else's commands retry.
daemon_gone() { ! pid_alive "$1" "$2"; }
cmd_restart() {
  need_root
  local c=${1:-} pid
  case $c in slurmctld|sshd) ;; *) echo "usage: $0 restart slurmctld|sshd" >&2; exit 2 ;; esac
  pid=$(daemon_pid "$c") || die "$c is not running (run: $0 up)"
  kill -TERM "$pid"
  must_wait 20 "$c (pid $pid) to stop" daemon_gone "$pid" "$c"
  case $c in
    slurmctld) /usr/sbin/slurmctld </dev/null >/dev/null 2>&1 ;;
    sshd) install -d -m 0755 /run/sshd; /usr/sbin/sshd -f "$SSHD_CONFIG" -E /var/log/sshd-runjob.log </dev/null >/dev/null 2>&1 ;;
  esac
  must_wait 30 "$c to answer again" healthy "$c"
  [ -s "$PID_DIR/$c.pid" ] && record_pid "$c"
  log "$c restarted (pid $pid -> $(daemon_pid "$c"))"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  restart) shift; cmd_restart "$@" ;;
  *) echo "usage: $0 up|down|status|env|restart slurmctld|sshd   (state dir: \$RUNJOB_TEST_DIR, default /var/lib/runjob-test)" >&2; exit 2 ;;
esac
