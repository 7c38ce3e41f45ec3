#!/usr/bin/env bash
# A flood of garbage datagrams (SPEC §12): 20000 on the probe socket (the one UDP socket of
# every query probe) and 20000 on each slot's notify socket, from a process outside every
# slot, while the checks run. slotd drops them all: it stays up and answers D-Bus calls
# throughout, strikes and kills nobody, changes no state, logs at most one line per socket
# per FLOOD_LOG_INTERVAL (10 s) naming what it drops, and its memory does not grow.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"
N=20000

MACHINE_CPUS=4 write_config
IV=$((1000 * TIME_SCALE))
D=$((30 * TIME_SCALE))
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet fl "servers = 3" \
        "[ports]" "game_base = 33400" "query_base = 33450" \
        "[checks]" "interval = ${IV}ms" "query = sqp" "query_timeout = $((500 * TIME_SCALE))ms" \
        "heartbeat = $((1500 * TIME_SCALE))ms" "cpu_tolerance = 1000%" "memory_tolerance = 20M" \
        "strikes = 3" "window = 10m" "[crash]" "restarts = 5" "window = 10m"
start_slotd
start_monitor "$SIGS"
for id in 0 1 2; do
        wait_prop $id ProcessState running
        wait_server $id
        wait_prop $id QueryMap test-map "$D"
done

# The probe socket: slotd's one UDP socket bound to 127.0.0.1 (the local proxy is off).
cat > "$T/flood.py" <<'EOF'
import os, random, socket, sys

def probe_port(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    with open(f"/proc/{pid}/net/udp") as f:
        next(f)
        for line in f:
            fields = line.split()
            addr, port = fields[1].split(":")
            if fields[9] in inodes and addr == "0100007F":
                return int(port, 16)
    sys.exit("no UDP socket of slotd on 127.0.0.1")

def garbage(rng):
    kind = rng.randrange(4)
    if kind == 0:   # an SQP challenge or query header with random bytes
        return bytes([rng.randrange(2)]) + rng.randbytes(rng.randrange(0, 64))
    if kind == 1:   # an A2S-looking reply
        return b"\xff\xff\xff\xff" + bytes([rng.choice(b"AIm")]) + rng.randbytes(rng.randrange(0, 200))
    if kind == 2:   # something sd_notify-like
        return rng.choice([b"READY=1", b"WATCHDOG=1", b"STOPPING=1", b"STATUS=x" * 600, b"=\n=\0", b""])
    return rng.randbytes(rng.randrange(1, 1400))

def main():
    what, n = sys.argv[1], int(sys.argv[2])
    rng = random.Random(14)
    if what == "probe-port":
        print(probe_port(int(sys.argv[3])))
        return
    if what == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        port = int(sys.argv[3])
        for _ in range(n):
            s.sendto(garbage(rng), ("127.0.0.1", port))
        return
    # unix: every notify socket named; sends block while a queue is full (slotd empties it)
    paths = sys.argv[3:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.settimeout(20)
    for i in range(n):
        for p in paths:
            s.sendto(garbage(rng), p)

main()
EOF
PORT=$(python3 "$T/flood.py" probe-port 0 "$SLOTD_PID")
note "probe socket: 127.0.0.1:$PORT"
NOTIFY=()
for id in 0 1 2; do NOTIFY+=("$T/state/notify.d/$id"); done
for p in "${NOTIFY[@]}"; do assert_ok "notify socket $p" test -S "$p"; done
# Slot 2, which the test never strikes, holds an acknowledged allocation through the flood.
ack_allocate 2

pids=()
for id in 0 1 2; do pids+=("$(sprop $id MainPID)"); done
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$SLOTD_PID/status"; }
rss0=$(rss)
lines0=$(wc -l < "$T/slotd.log")

# ---- The flood, both kinds at once; D-Bus answers meanwhile ----
flood_start=$SECONDS
python3 "$T/flood.py" udp "$N" "$PORT" &
udp=$!
bg_track $udp
python3 "$T/flood.py" unix "$N" "${NOTIFY[@]}" &
unix=$!
bg_track $unix
calls=0
slowest=0
while kill -0 $udp 2>/dev/null || kill -0 $unix 2>/dev/null; do
        t0=$(date +%s%N)
        assert_eq "$(mprop SlotCount)" 3 "SlotCount during the flood"
        ms=$((($(date +%s%N) - t0) / 1000000))
        [ $ms -le $slowest ] || slowest=$ms
        calls=$((calls + 1))
done
wait $udp || fail "the UDP flood failed"
bg_untrack $udp
wait $unix || fail "the notify flood failed"
bg_untrack $unix
# At most a line per socket per 10 s while it lasted (and the one that began it).
max_lines=$(((SECONDS - flood_start) / 10 + 2))
note "the flood lasted $((SECONDS - flood_start)) s: at most $max_lines lines per socket"
note "$calls D-Bus calls answered during the flood, the slowest in $slowest ms"
assert_ok "D-Bus calls answered during the flood ($calls)" [ "$calls" -ge 1 ]
assert_ok "the slowest call within $((5000 * TIME_SCALE)) ms ($slowest)" [ "$slowest" -le $((5000 * TIME_SCALE)) ]
assert_ok "slotd alive" kill -0 "$SLOTD_PID"

# ---- After it: the same servers, no strike, a few log lines, no growth ----
# Three rounds after the flood: a probe answer or a heartbeat lost to it would show as a
# strike by then.
wait_rounds 0 3 "$D"
assert_eq "$(signal_count "$SIGS" Misbehaved)" 0 "Misbehaved signals"
assert_eq "$(signal_count "$SIGS" Crashed)" 0 "Crashed signals"
states=(online online allocated)
for id in 0 1 2; do
        assert_eq "$(sprops $id MainPID State ProcessState Strikes LastCheckError)" \
                "${pids[$id]}|${states[$id]}|running|0|" "slot $id MainPID|State|ProcessState|Strikes|LastCheckError"
done
assert_eq "$(mprop Faults)" 0 "Faults"
ack_check "after the flood"
probe_lines=$(grep -c "Dropping a datagram on the probe socket from 127.0.0.1:[0-9]* that answers no probe" "$T/slotd.log" || true)
note "probe socket log lines: $probe_lines"
assert_ok "the probe socket's drops are logged ($probe_lines lines)" [ "$probe_lines" -ge 1 ]
assert_ok "... at most a line per 10 s ($probe_lines lines)" [ "$probe_lines" -le "$max_lines" ]
for id in 0 1 2; do
        n=$(grep -c "slot $id ([a-z]*): Its notify socket: dropping a datagram .*process [0-9]" "$T/slotd.log" || true)
        assert_ok "slot $id's notify drops are logged ($n lines)" [ "$n" -ge 1 ]
        assert_ok "... at most a line per 10 s ($n lines)" [ "$n" -le "$max_lines" ]
done
lines=$(($(wc -l < "$T/slotd.log") - lines0))
note "slotd's log grew by $lines lines for $((N * 4)) datagrams"
assert_ok "the log grew by few lines ($lines)" [ "$lines" -le $((4 * max_lines + 40)) ]
rss1=$(rss)
note "slotd's RSS: $rss0 kB before, $rss1 kB after"
assert_ok "RSS grew by at most 2 MB ($rss0 → $rss1 kB)" [ $((rss1 - rss0)) -le 2048 ]
# Still served, still judging: a server silent now is struck.
control 1 "query off"
wait_sig "$SIGS" Misbehaved "1 query 1" "$D"
assert_eq "$(sig_args "$SIGS" Misbehaved | paste -sd,)" "1 query 1" "Misbehaved signals after the flood"
ack_check "at the end"
finish
