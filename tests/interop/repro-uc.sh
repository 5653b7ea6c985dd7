#!/usr/bin/env bash
# Focused reproduction of the UC hang found by run-matrix.sh (2026-11-29): ibv_uc_pingpong between
# the emulator and kernel rxe stops after a few to ~60 of 100 iterations WITHOUT any injected
# loss, in both directions: the last UC message rxe sent to the emulator is complete and
# in sequence on the bridge capture (4 packets, contiguous PSNs, valid ICRCs), but the emulator
# never completes it, so both sides wait forever. RC, UD and everything else pass; at netdev MTU
# 9000 (a 4 KiB UC message is one SEND_ONLY packet) UC passes too.
# The hung emulator's counters (`roce stat -a`, saved as *.emustat) show it received all 4 packets
# of that message (rx_datagrams = rcvd_pkts) and counted req_dropped 3: the FIRST packet was taken,
# the MIDDLE, MIDDLE and LAST were dropped by the UC responder (seen 4 times out of 4 runs, as
# server and as client; e.g. rcvd 36 / rdma_recvs 8 / req_dropped 3, and rcvd 8 / recvs 1 / 3).
#
#   repro-uc.sh [extra run-matrix.sh options]     e.g. --mtus 9000
#
# Fixed by 4540c69 (runtime: datagrams handled in arrival order); passed 2/2 on 2026-11-29 16:25.
# Runs only the two ibv_uc_pingpong rows of the matrix, no loss; the evidence is kept in
# .lab/interop-matrix-DATE/runs/: *.pcap (bridge), *.decode (roce decode), *.emustat (`roce stat -a`
# of the hung emulator, its UDP socket's `ss -uanmp` and the namespace's UDP error counters),
# *.guest (rxe counters), *.client / *.server (tool output).
exec "$(dirname "$0")/run-matrix.sh" --mtus 1500 --losses none --only '^ibv_uc_pingpong$' "$@"
