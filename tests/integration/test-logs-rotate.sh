#!/usr/bin/env bash
# Bounded server logs (issue 27 point 5, SPEC §3): the keeper moves the server's output from a
# pipe into logs/server.log and rotates it at logs.max_size, keeping logs.keep older files.
# A chatty server (the test server's "spam BYTES TAG": numbered 64-byte lines) fills several
# files: none exceeds max_size, at most keep older ones are there, the newest lines are in
# server.log, and the stream across the files is whole (nothing dropped: LogBytesLost 0).
# It goes on across a restart of the server by its keeper and across a restart of slotd (the
# keeper, adopted, keeps rotating), and on a full slots_dir the output is dropped, counted in
# LogBytesLost and logged by slotd, the server never blocked; with room again it is written.
# A keeper killed outright (SIGKILL, as by the OOM killer or cgroup.kill) with output still in
# the pipe loses none of it: slotd, which holds the pipe's read end too, moves it into
# server.log before it tells the exit; on a full slots_dir it counts and logs it instead.
. "$(dirname "$0")/lib.sh"
command -v mount >/dev/null || skip "mount is not installed"
command -v curl >/dev/null || skip "curl is not installed"

mkdir -p "$T/slots"
mount -t tmpfs -o size=4M,mode=755 slotd-it-logs "$T/slots" || skip "cannot mount a tmpfs"
track_mount "$T/slots" # lib.sh takes it off after slotd and its keepers are gone

MAX=65536
MPORT=$(free_port)
METRICS_LISTEN=127.0.0.1:$MPORT write_config
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet game "servers = 1" \
        "[ports]" "game_base = 26700" "query_base = 26750" "[checks]" "interval = 0" \
        "[crash]" "restarts = 3" "window = 10m" "[logs]" "max_size = 64K" "keep = 2"
start_slotd
wait_prop 0 ProcessState running
wait_server 0
LOGS=$(sprop 0 Home)/logs

# spam TAG BYTES: the server writes BYTES of TAG lines and "TAG done LINES", the last line
# seen in server.log.
spam_done() { grep -q "^$1 done $2\$" "$LOGS/server.log"; }
spam() {
        control 0 "spam $2 $1"
        wait_until 60 "'$1 done' in server.log" spam_done "$1" $(($2 / 64))
}
# The files are bounded: none over max_size, at most 2 older ones, server.log.3 never.
check_bounded() {
        local f size
        for f in "$LOGS"/server.log*; do
                size=$(stat -c %s "$f")
                [ "$size" -le $MAX ] || fail "$(basename "$f") is $size bytes, over $MAX"
        done
        assert_eq "$(cd "$LOGS" && ls server.log* | sort | tr '\n' ' ')" \
                "server.log server.log.1 server.log.2 " "the log files ($1)"
        assert_eq "$(sprop 0 LogBytesLost)" 0 "LogBytesLost ($1)"
}
# tag_lines TAG: the numbers of TAG's whole lines across the files, oldest first.
tag_lines() {
        cat "$LOGS/server.log.2" "$LOGS/server.log.1" "$LOGS/server.log" 2>/dev/null |
                sed -nE "s/^$1 ([0-9]{10}) x+\$/\1/p"
}
# consecutive TAG LAST: TAG's lines are there without a gap and end at LAST; prints how many.
consecutive() {
        tag_lines "$1" | awk -v last="$2" '
                NR > 1 && $1 + 0 != prev + 1 { print "gap after " prev; exit 1 }
                { prev = $1 + 0; n++ }
                END { if (prev != last) { print "ends at " prev; exit 1 } print n }'
}

# 1. 100,000 bytes (1,562 lines) with what the server logged at start: one rotation; every
# line is there, in order, across server.log.1 and server.log (a line cut at the rotation
# is whole again end to end).
spam a 100000
assert_eq "$(consecutive a 1561)" 1562 "a's lines across the files"
assert_ok "server.log.1 is full" test "$(stat -c %s "$LOGS/server.log.1")" -eq $MAX
assert_ok "no server.log.2 yet" test ! -e "$LOGS/server.log.2"
assert_eq "$(sprop 0 LogBytesLost)" 0 "LogBytesLost after a"

# 2. 400,000 bytes more: several rotations; the newest lines are kept, with no gap, and the
# oldest files are gone.
spam b 400000
check_bounded b
n=$(consecutive b 6249) || fail "b's lines: $n"
note "b: the last $n of 6250 lines kept in 3 files"
assert_ok "the kept lines fill the files ($n)" test "$n" -ge $((2 * MAX / 64))
assert_ok "a's lines rotated out" test -z "$(tag_lines a)"
bytes=$(cat "$LOGS"/server.log* | wc -c)
assert_ok "at most 3 × max_size kept ($bytes)" test "$bytes" -le $((3 * MAX))

# 3. The server crashes; its keeper restarts it, the new server writes to the same pipe.
pid=$(sprop 0 MainPID)
control 0 "exit 3"
wait_new_pid 0 "$pid"
wait_server 0
wait_until 20 "the keeper's restart logged" \
        grep -q "slot 0 (game): Server crashed: exit code 3; restarted by its keeper" "$T/slotd.log"
spam c 200000
check_bounded c
n=$(consecutive c 3124) || fail "c's lines: $n"

# 4. slotd is killed and started again: the keeper, adopted, goes on rotating.
pid=$(sprop 0 MainPID)
kill -KILL "$SLOTD_PID"
wait "$SLOTD_PID" 2>/dev/null || true
SLOTD_PID=
start_slotd
wait_prop 0 ProcessState running
assert_eq "$(sprop 0 MainPID)" "$pid" "the server after slotd's restart"
spam d 300000
check_bounded d
n=$(consecutive d 4686) || fail "d's lines: $n"
assert_ok "d's newest lines fill server.log.1 and .2" test "$n" -ge $((2 * MAX / 64))

# 4b. The adopted keeper (its pipe taken back by this slotd) is stopped, the server writes k's
# 500 lines into the pipe (they fit: 32,000 bytes and a few of its own lines, its capacity is
# 64 KiB), then the keeper is SIGKILLed: the namespace, and the server, end with it. Every
# line is in server.log (rotated as the keeper would), the server restarted after.
keeper_of() { awk '$1 == "PPid:" { print $2 }' "/proc/$1/status"; }
# kill_keeper_with TAG [CMD...]: stops the keeper, has the server write TAG's 500 lines into
# the pipe (its "max-players 77" after them tells they are written), runs CMD, and SIGKILLs
# the keeper.
max_players_is() { [ "$(server_state 0 max_players)" = "$1" ]; }
kill_keeper_with() {
        local keeper
        keeper=$(keeper_of "$pid")
        [ -n "$keeper" ] && [ "$keeper" != 1 ] || fail "the keeper of server $pid: '$keeper'"
        control 0 "max-players 1"
        wait_until 20 "max_players 1" max_players_is 1
        kill -STOP "$keeper"
        control 0 "spam 32000 $1"
        control 0 "max-players 77"
        wait_until 20 "the server wrote $1's lines into the pipe" max_players_is 77
        assert_ok "$1's lines are not in the files yet" eval '! grep -q "^$1 done" "$LOGS"/server.log*'
        shift
        "$@"
        kill -KILL "$keeper"
}
kill_keeper_with k
wait_new_pid 0 "$pid"
wait_server 0
pid=$(sprop 0 MainPID)
wait_until 20 "slotd logs the move" grep -qE \
        "slot 0 \(game\): Moved [0-9]+ bytes of the server's output that its keeper left in the pipe into .*/server.log" \
        "$T/slotd.log"
grep "Moved" "$T/slotd.log" | tail -n 1 | sed 's/^/# /'
assert_ok "'k done 500' in the files" grep -qx "k done 500" "$LOGS"/server.log*
n=$(consecutive k 499) || fail "k's lines: $n"
assert_eq "$n" 500 "k's lines across the files after the keeper's SIGKILL"
check_bounded k

# 5. slots_dir full: the server's output is dropped, the server goes on (its "done" line is
# written, to nowhere: it is not blocked), and the loss is counted and logged.
dd if=/dev/zero of="$T/slots/filler" bs=4k status=none 2>/dev/null || true
assert_eq "$(df --output=avail -B1 "$T/slots" | tail -n 1 | tr -d ' ')" 0 "space left on slots_dir"
control 0 "spam 200000 e"
# e's 3,125 lines and its "e done 3125" line: 200,012 bytes, beyond what fits in the files'
# last page (less than 4 KiB of them may have gone there).
lost_at_least() { [ "$(sprop 0 LogBytesLost)" -ge "$1" ]; }
wait_until 60 "LogBytesLost counts e's output" lost_at_least $((200012 - 4096))
lost=$(sprop 0 LogBytesLost)
assert_ok "LogBytesLost at most e's output ($lost)" test "$lost" -le 200012
wait_until 20 "slotd logs the loss" grep -qE \
        "slot 0 \(game\): Dropped [0-9]+ bytes of the server's output that .*/server.log could not take: No space left on device" \
        "$T/slotd.log"
assert_eq "$(sprop 0 MainPID)" "$pid" "the server while slots_dir is full"
# The metric counts it too (this slotd's count: it started after the keeper, whose whole
# count it took at its first look).
metric() { curl -s --max-time 10 "http://127.0.0.1:$MPORT/metrics" | sed -n "s/^slotd_log_bytes_lost_total{fleet=\"game\"} //p"; }
metric_is() { [ "$(metric)" = "$1" ]; }
wait_until 20 "slotd_log_bytes_lost_total = $lost" metric_is "$lost"
PASSED=$((PASSED + 1))
grep "Dropped" "$T/slotd.log" | tail -n 1 | sed 's/^/# /'

# 6. Room again: output is written again, and nothing more is lost.
rm -f "$T/slots/filler"
spam f 10000
assert_eq "$(sprop 0 LogBytesLost)" "$lost" "LogBytesLost once there is room"
n=$(consecutive f 155) || fail "f's lines: $n"
assert_eq "$n" 156 "f's lines"

# 7. The keeper killed with l's lines in the pipe while slots_dir is full: server.log cannot
# take them (what fits in its last page may go there); slotd drops the rest, counts it in
# LogBytesLost and the metric, and logs it.
pid=$(sprop 0 MainPID)
before=$(sprop 0 LogBytesLost)
# The disk is filled once the lines are in the pipe (the server's state file is there too), and
# the older files are pinned by links of their own: a rotation frees no room either.
fill() {
        ln "$LOGS/server.log.1" "$T/slots/pin.1" && ln "$LOGS/server.log.2" "$T/slots/pin.2" ||
                fail "cannot pin the older files"
        dd if=/dev/zero of="$T/slots/filler" bs=4k status=none 2>/dev/null || true
        assert_eq "$(df --output=avail -B1 "$T/slots" | tail -n 1 | tr -d ' ')" 0 "space left on slots_dir"
}
kill_keeper_with l fill
lost_line() { grep -E "slot 0 \(game\): Dropped [0-9]+ bytes of the server's output that its keeper left in the pipe and .*/server.log could not take: No space left on device" "$T/slotd.log"; }
wait_until 20 "slotd logs the pipe's loss" lost_line
lost_line | tail -n 1 | sed 's/^/# /'
dropped=$(lost_line | tail -n 1 | sed -E 's/.*Dropped ([0-9]+) bytes.*/\1/')
assert_ok "at least l's lines beyond a page dropped ($dropped)" test "$dropped" -ge $((32011 - 4096))
# Counted at once, before the exit was told: its "in all" is LogBytesLost then. The server
# slotd starts again may have its first lines dropped by its keeper since: counted after.
assert_eq "$(lost_line | tail -n 1 | sed -E 's/.*\(([0-9]+) in all\)$/\1/')" $((before + dropped)) \
        "LogBytesLost with the pipe's loss"
assert_ok "LogBytesLost at least that" test "$(sprop 0 LogBytesLost)" -ge $((before + dropped))
metric_is_prop() { metric_is "$(sprop 0 LogBytesLost)"; }
wait_until 20 "slotd_log_bytes_lost_total = LogBytesLost" metric_is_prop
PASSED=$((PASSED + 1))

# 8. The keeper killed with m's lines in the pipe while no slotd runs: the keeper held the
# pipe's only read end left, so the lines are lost, and slotd, back, says so (not counted: how
# much was in the pipe is unknown).
rm -f "$T/slots/filler" "$T/slots/pin.1" "$T/slots/pin.2"
# The server slotd started on a full disk could not write its state file: a new one.
wait_new_pid 0 "$pid"
pid=$(sprop 0 MainPID)
scall 0 Restart >/dev/null
wait_new_pid 0 "$pid"
wait_server 0
pid=$(sprop 0 MainPID)
cg=$(sprop 0 Cgroup)
kill_slotd() { kill -KILL "$SLOTD_PID"; wait "$SLOTD_PID" 2>/dev/null || true; SLOTD_PID=; }
kill_keeper_with m kill_slotd
slot_empty() { grep -q '^populated 0' "$cg/cgroup.events"; }
wait_until 20 "slot 0's cgroup empty (the keeper and its namespace ended)" slot_empty
start_slotd
wait_until 20 "slotd tells the loss it cannot count" grep -q \
        "slot 0 (game): Its keeper was killed while slotd was not running: what its server had written and the keeper had not yet moved to logs/server.log is lost" \
        "$T/slotd.log"
assert_ok "m's lines are in no file (they went with the pipe)" \
        eval '! grep -q "^m " "$LOGS"/server.log*'
wait_new_pid 0 "$pid"
wait_server 0
finish
