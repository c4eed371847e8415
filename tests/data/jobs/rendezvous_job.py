"""A multi-node job for the training template: every node prints its rank, then all meet at
a TCP rendezvous on MASTER_ADDR:MASTER_PORT (node 0 listens, the others connect and say
hello), as torch.distributed's TCP store would.

usage: rendezvous_job.py [--wait-usr1] [--slow-save RANK]
--wait-usr1: after meeting, wait for the time-limit warning, print it per node and exit 75.
--slow-save RANK: that rank takes 3 s to save after the warning (the others exit at once).
"""
import os
import socket
import sys
import time

from runjob_core.job import RESUME_EXIT_CODE, on_preempt_signal, should_stop

rank, nnodes = int(os.environ["NODE_RANK"]), int(os.environ["NNODES"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
node = os.environ.get("SLURMD_NODENAME", "?")
print(f"rank {rank} of {nnodes} on {node}: MASTER={addr}:{port} GPUS_PER_NODE={os.environ['GPUS_PER_NODE']} "
      f"WORLD_SIZE={os.environ['WORLD_SIZE']}", flush=True)
on_preempt_signal()
if rank == 0:
    server = socket.create_server((addr, port))
    server.settimeout(60)
    met = []
    while len(met) < nnodes - 1:
        conn, _ = server.accept()
        met.append(int(conn.recv(64).decode().split()[1]))
        conn.sendall(b"welcome")
        conn.close()
    print(f"rank 0 met ranks {sorted(met)}", flush=True)
else:
    deadline = time.time() + 60
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    conn.sendall(f"rank {rank}".encode())
    print(f"rank {rank} got {conn.recv(64).decode()!r} from rank 0", flush=True)
if "--wait-usr1" in sys.argv:
    print(f"rank {rank} waiting for the warning", flush=True)
    while not should_stop():
        time.sleep(0.1)
    if "--slow-save" in sys.argv and sys.argv[sys.argv.index("--slow-save") + 1] == str(rank):
        time.sleep(3)
    print(f"rank {rank} got USR1: saved, exiting to be resumed", flush=True)
    sys.exit(RESUME_EXIT_CODE)
