# shellcheck shell=bash
# One server/client tool run across two guests, for selftest.sh and rxe-matrix.sh.
# The caller defines L (lab.sh), OUT (output dir), and the hooks row/timed; it may set
# SERVER/CLIENT (guest names, default a/b) and SERVER_IP (default 198.18.0.2).

SERVER_GRACE=${SERVER_GRACE:-30}
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

# pair LABEL TIMEOUT CMD...: CMD on the server guest, CMD + server address on the client.
pair() {
  local label=$1 to=$2; shift 2
  local srv=${SERVER:-a} cli=${CLIENT:-b} sip=${SERVER_IP:-198.18.0.2}
  local cmd="$*" f=$OUT/${label//[ \/]/_} t0 id rc_c=0 rc_s=0 res=pass secs fig
  t0=$(now_ms)
  id=$("$L" run --bg --timeout "$to" "$srv" "$cmd")
  "$L" run --timeout 30 "$srv" "$WAIT_LISTEN" >/dev/null || res=fail
  "$L" run --timeout "$to" "$cli" "$cmd $sip" >"$f.client" 2>&1 || rc_c=$?
  [ "$rc_c" = 0 ] || "$L" run "$srv" "pkill -9 ${cmd%% *}" >/dev/null 2>&1 || true
  # Once the client is done the server should finish promptly; if not (e.g. a UD server still
  # waiting for datagrams lost on the wire) kill it rather than wait for its full timeout.
  "$L" wait "$srv" "$id" "$SERVER_GRACE" >"$f.server" 2>&1 || rc_s=$?
  if [ "$rc_s" = 124 ]; then
    "$L" run "$srv" "pkill -9 ${cmd%% *}" >/dev/null 2>&1 || true
    rc_s=0; "$L" wait "$srv" "$id" 30 >>"$f.server" 2>&1 || rc_s=$?
    echo "(server killed: still running ${SERVER_GRACE}s after the client ended)" >>"$f.server"
  fi
  [ "$rc_c" = 0 ] && [ "$rc_s" = 0 ] || res=fail
  secs=$(secs_since "$t0")
  fig=$(figures "$f.client")
  [ "$res" = pass ] || fig="client rc $rc_c, server rc $rc_s"
  row "$label" "$res" "$fig" "$secs"
  timed "$label" "$secs"
  [ "$res" = pass ] || { log "$label failed; client output:"; tail -n 5 "$f.client" >&2; }
  return 0
}
