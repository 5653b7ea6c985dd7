# shellcheck shell=bash
# One server/client tool run across two guests, for selftest.sh and rxe-matrix.sh.
# The caller defines L (lab.sh), OUT (output dir), and the hooks row/timed; it may set
# SERVER/CLIENT (guest names, default a/b) and SERVER_IP (default 198.18.0.2).

SERVER_GRACE=${SERVER_GRACE:-15}     # seconds a server may outlive its client
HANG_RETRIES=${HANG_RETRIES:-1}      # reruns after a server hang (with a restarted server guest)
WAIT_LISTEN='for i in $(seq 150); do ss -ltn | grep -q ":18515 " && exit 0; sleep 0.1; done; exit 1'

# figures FILE: the numbers worth printing from a tool's client output.
figures() {
  awk '/Mbit\/sec/{mb=$(NF-1)} /usec\/iter/{us=$(NF-1)}
       /#bytes/{lat = ($0 ~ /t_typical/)}
       /^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/{ if (lat) typ=$5; else bw=$4 }
       END{ if (bw != "") printf "%s MB/s avg", bw;
            else if (typ != "") printf "%s us typical", typ;
            else if (us != "") printf "%s Mbit/s, %s us/iter", mb, us }' "$1"
}

# pair_once FILE TIMEOUT CMD: sets RC_C, RC_S and HUNG (client passed, server did not end).
pair_once() {
  local f=$1 to=$2 cmd=$3 srv=${SERVER:-a} cli=${CLIENT:-b} sip=${SERVER_IP:-198.18.0.2} id
  RC_C=0 RC_S=0 HUNG=0
  id=$("$L" run --bg --timeout "$to" "$srv" "$cmd")
  "$L" run --timeout 30 "$srv" "$WAIT_LISTEN" >/dev/null || RC_S=listen
  "$L" run --timeout "$to" "$cli" "$cmd $sip" >"$f.client" 2>&1 || RC_C=$?
  [ "$RC_C" = 0 ] || "$L" run "$srv" "pkill -9 ${cmd%% *}" >/dev/null 2>&1 || true
  # Once the client is done the server should finish promptly. If not, kill it rather than
  # wait for its whole timeout. Seen with kernel rxe: ibv_rc_pingpong sets retry_cnt 7, which
  # rxe treats as "retry forever"; if the ACK for the server's last message is lost after the
  # client exited, the server retransmits to a QP that no longer exists and never returns.
  "$L" wait "$srv" "$id" "$SERVER_GRACE" >"$f.server" 2>&1 || RC_S=$?
  if [ "$RC_S" = 124 ]; then
    HUNG=$(( RC_C == 0 ))
    "$L" run --timeout 20 "$srv" "pkill -9 ${cmd%% *}" >/dev/null 2>&1 || true
    "$L" wait "$srv" "$id" 20 >>"$f.server" 2>&1 || true
    echo "(server killed: still running ${SERVER_GRACE}s after the client ended)" >>"$f.server"
  fi
}

# pair LABEL TIMEOUT CMD...: CMD on the server guest, CMD + server address on the client.
pair() {
  local label=$1 to=$2; shift 2
  local cmd="$*" f=$OUT/${label//[ \/]/_} t0 res=pass secs fig tries=0
  t0=$(now_ms)
  pair_once "$f" "$to" "$cmd"
  while [ "$HUNG" = 1 ] && [ "$tries" -lt "$HANG_RETRIES" ]; do
    tries=$((tries + 1))
    log "$label: server hung after its client passed; restarting ${SERVER:-a} and retrying"
    "$L" restart "${SERVER:-a}" >/dev/null
    pair_once "$f" "$to" "$cmd"
  done
  [ "$RC_C" = 0 ] && [ "$RC_S" = 0 ] || res=fail
  secs=$(secs_since "$t0")
  fig=$(figures "$f.client")
  [ "$res" = pass ] || fig="client rc $RC_C, server rc $RC_S"
  [ "$HUNG" = 1 ] && fig="server hung, client passed"
  [ "$tries" = 0 ] || label="$label (retry $tries)"
  row "$label" "$res" "$fig" "$secs"
  timed "$label" "$secs"
  [ "$res" = pass ] || { log "$label failed; client output:"; tail -n 5 "$f.client" >&2; }
  return 0
}
