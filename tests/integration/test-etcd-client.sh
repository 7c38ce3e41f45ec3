#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The etcd client (fleet/etcd/etcd.h, issue 15) against a real 3-member etcd cluster: put, range,
# prefix range, txn (both branches; create, mod, value and version compares), leases (grant,
# keepalive, expiry; many kept alive on one LeaseKeepAlive stream, a keepalive cancelled, one
# timed out and answered late, the stream's member restarted), watches (order, history, a compacted start -> ESTALE, a member stopped or
# killed -> ECONNRESET), failover with one member killed, quorum lost (ETIMEDOUT within the
# timeout, no hang) and quorum back. One etcd-drive process (one Etcd, one sd-event loop) lives
# through it all, driven as a coprocess so that members die between its commands.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/etcd-lib.sh"
: "${ETCD_DRIVE:?ETCD_DRIVE must name the etcd-drive binary}"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"

etcd_cluster_start 3
TIMEOUT_MS=$((1000 * TIME_SCALE))
LOG=$T/drive.log

coproc DRIVE { ETCD_TIMEOUT_MS=$TIMEOUT_MS exec "$ETCD_DRIVE" 2>"$T/drive.err"; }
drive_pid=$DRIVE_PID
BG_PIDS+=("$drive_pid")
# Our own copies of the coprocess's pipes (bash forgets DRIVE when it exits); the originals
# closed, so that closing DRIVE_IN is its end of input.
drive_r=${DRIVE[0]} drive_w=${DRIVE[1]}
exec {DRIVE_OUT}<&"$drive_r" {DRIVE_IN}>&"$drive_w"
eval "exec $drive_r<&- $drive_w>&-"

# d COMMAND: sends COMMAND to etcd-drive and reads up to its result line (the one ending in
# " ms=N"): R is that line, OUT every line read (kvs, and watch events that came meanwhile).
# Everything goes to $LOG too.
# d_send COMMAND [NOTE] and d_read COMMAND: the same in two steps, for a command answered
# after something the test does meanwhile (NOTE goes to $LOG beside it).
d() { d_send "$*"; d_read "$*"; }
d_send() {
        echo "$1" >&"$DRIVE_IN"
        echo "> $1${2:+ $2}" >>"$LOG"
}
d_read() {
        local line
        OUT=()
        while :; do
                IFS= read -r -t $((30 * TIME_SCALE)) line <&"$DRIVE_OUT" ||
                        fail "etcd-drive gave no answer to '$1'; its log: $(tail -n 20 "$LOG"; cat "$T/drive.err")"
                echo "$line" >>"$LOG"
                OUT+=("$line")
                [[ $line =~ \ ms=[0-9]+$ ]] && break
        done
        R=$line
}
# field NAME: NAME=value of R.
field() { sed -nE "s/^(.* )?$1=([^ ]*).*/\2/p" <<<"$R"; }
# kv_lines: the kv lines of OUT, without their revisions: "KEY VALUE".
kv_lines() { printf '%s\n' "${OUT[@]}" | sed -nE 's/^ *kv ([^ ]*) ([^ ]*) .*/\1 \2/p' | paste -sd,; }
ok_result() { [[ $R == ok* ]] || fail "expected ok, got: $R"; PASSED=$((PASSED + 1)); }
# events NAME: the events watch NAME printed so far, "TYPE KEY VALUE" joined by commas.
events() { sed -nE "s/^event $1 ([A-Z]*) ([^ ]*) ([^ ]*) .*/\1 \2 \3/p" "$LOG" | paste -sd,; }

# ---- put, range, prefix range ----
d put /it/a/1 one
ok_result
rev_a1=$(field rev)
d put /it/a/2 two
d put /it/b x
d get /it/a/1
assert_eq "$(kv_lines)" "/it/a/1 one" "get /it/a/1"
assert_ok "its revisions" grep -q "^kv /it/a/1 one c=$rev_a1 m=$rev_a1 v=1 l=0\$" <<<"${OUT[0]}"
d prefix /it/a/
assert_eq "$(kv_lines)" "/it/a/1 one,/it/a/2 two" "prefix /it/a/"
assert_eq "$(field count) $(field more)" "2 0" "prefix count and more"
d prefix /it/a/ 1
assert_eq "$(kv_lines)" "/it/a/1 one" "prefix /it/a/ limit 1"
assert_eq "$(field count) $(field more)" "2 1" "limited prefix count and more"
d get /it/none
ok_result
assert_eq "$(kv_lines)" "" "a missing key"
d delprefix /it/a/
assert_eq "$(field deleted)" 2 "keys deleted by prefix"

# ---- txn: both branches, revision compares ----
d txn create:/it/t:=:0 then put:/it/t:v1 get:/it/t else get:/it/t
assert_eq "$(field succeeded)" 1 "txn on a new key"
created=$(field rev)
assert_eq "$(kv_lines)" "/it/t v1" "the txn's own range sees its put"
d txn create:/it/t:=:0 then put:/it/t:v2 else get:/it/t
assert_eq "$(field succeeded)" 0 "txn create_revision = 0 on an existing key"
assert_eq "$(field rev)" "$created" "a failed txn writes nothing"
assert_eq "$(kv_lines)" "/it/t v1" "the failure branch's range"
d txn mod:/it/t:=:"$created" create:/it/t:=:"$created" then put:/it/t:v3 else get:/it/t
assert_eq "$(field succeeded)" 1 "txn mod_revision unchanged"
d txn mod:/it/t:=:"$created" then put:/it/t:v4 else get:/it/t
assert_eq "$(field succeeded)" 0 "txn on a stale mod_revision"
assert_eq "$(kv_lines)" "/it/t v3" "the value the stale txn did not overwrite"
d txn value:/it/t:=:v3 version:/it/t:=:2 then del:/it/t else get:/it/t
assert_eq "$(field succeeded)" 1 "txn value and version compares"
assert_eq "$(printf '%s\n' "${OUT[@]}" | sed -nE 's/^resp 0 .* deleted=([0-9]+)$/\1/p')" 1 \
        "the txn's delete"
d get /it/t
assert_eq "$(kv_lines)" "" "the key the txn deleted"

# ---- nested txns (etcd 3.4's request_txn): one request, each nested txn on its own compares ----
# nested_line I: the "nested I" or "batched I" line of OUT.
nested_line() { printf '%s\n' "${OUT[@]}" | grep -E "^(nested|batched) $1 " || true; }
d put /it/n/taken old
taken_rev=$(field rev)
d nest create:/it/n/a:=:0 then put:/it/n/a:A else get:/it/n/a ';' \
        create:/it/n/taken:=:0 then put:/it/n/taken:B else get:/it/n/taken
assert_eq "$(field succeeded) $(field n)" "1 2" "the txn of two nested txns ($R)"
nest_rev=$(field rev)
assert_ok "a nested txn whose compare held ($(nested_line 0))" \
        grep -q "^nested 0 succeeded=1 rev=$nest_rev n=1\$" <<<"$(nested_line 0)"
assert_ok "a nested txn whose compare failed ($(nested_line 1))" \
        grep -q "^nested 1 succeeded=0 rev=$nest_rev n=1\$" <<<"$(nested_line 1)"
assert_eq "$(kv_lines)" "/it/n/taken old" "the failed nested txn's failure branch read the key"
d get /it/n/a
assert_eq "$(kv_lines)" "/it/n/a A" "the nested put that held, read back"
assert_ok "written at the txn's revision" grep -q " c=$nest_rev m=$nest_rev " <<<"${OUT[0]}"
d get /it/n/taken
assert_eq "$(kv_lines)" "/it/n/taken old" "the nested put that failed its compare, not written"
assert_ok "unchanged" grep -q " m=$taken_rev " <<<"${OUT[0]}"

# The group commit (etcd_batch_txn): three txns queued at once go in one request; two that put
# the same key (etcd would refuse the request) go in two, in their order.
d batch create:/it/b/1:=:0 then put:/it/b/1:one ';' \
        create:/it/n/taken:=:0 then put:/it/n/taken:X else get:/it/n/taken ';' \
        create:/it/b/2:=:0 then put:/it/b/2:two
assert_eq "$(field txns) $(field requests)" "3 1" "three txns queued at once, one request"
batch_rev=$(nested_line 0 | sed -nE 's/.* rev=([0-9]+) .*/\1/p')
assert_ok "txn 0 held ($(nested_line 0))" grep -q "^batched 0 succeeded=1 " <<<"$(nested_line 0)"
assert_ok "txn 1 failed its compare alone ($(nested_line 1))" \
        grep -q "^batched 1 succeeded=0 rev=$batch_rev " <<<"$(nested_line 1)"
assert_ok "txn 2 held, at the same revision ($(nested_line 2))" \
        grep -q "^batched 2 succeeded=1 rev=$batch_rev " <<<"$(nested_line 2)"
assert_eq "$(kv_lines)" "/it/n/taken old" "txn 1's failure branch"
d prefix /it/b/
assert_eq "$(kv_lines)" "/it/b/1 one,/it/b/2 two" "the batch's puts, read back"
d batch create:/it/d:=:0 then put:/it/d:first ';' create:/it/d:=:0 then put:/it/d:second else get:/it/d
assert_eq "$(field txns) $(field requests)" "2 2" "two txns putting one key: two requests"
assert_ok "the first put it ($(nested_line 0))" grep -q "^batched 0 succeeded=1 " <<<"$(nested_line 0)"
assert_ok "the second found it ($(nested_line 1))" grep -q "^batched 1 succeeded=0 " <<<"$(nested_line 1)"
assert_eq "$(kv_lines)" "/it/d first" "the second's failure branch read the first's put"
# Nor do two of which the later compares a key the earlier puts: etcd decides all of a request's
# compares before it applies any op, so in one request the second would not see the first's put.
d batch create:/it/v:=:0 then put:/it/v:new ';' value:/it/v:=:new then put:/it/v-seen:yes else get:/it/v
assert_eq "$(field txns) $(field requests)" "2 2" "a txn comparing the key the one before it puts: two requests"
assert_ok "the second's compare saw the first's put ($(nested_line 1))" \
        grep -q "^batched 1 succeeded=1 " <<<"$(nested_line 1)"
# A txn cancelled while queued is never sent; one cancelled once sent (by the answer of another
# in its request) is applied but its callback never runs.
d batch-cancel create:/it/c/0:=:0 then put:/it/c/0:a ';' create:/it/c/1:=:0 then put:/it/c/1:b ';' \
        create:/it/c/2:=:0 then put:/it/c/2:c
assert_eq "$(field txns) $(field requests)" "1 1" "one txn answered, in one request ($R)"
assert_eq "$(printf '%s\n' "${OUT[@]}" | grep -c '^batched ')" 1 "no answer for the cancelled txns"
d prefix /it/c/
assert_eq "$(kv_lines)" "/it/c/0 a,/it/c/2 c" "the txn cancelled before it was sent is not applied"
# etcd's limits: 300 txns of two compares and two puts at once are 3 requests (126 nested txns
# and their 2 ops within --max-txn-ops 128); 40 of two 30,000-byte values (60 kB of protobuf
# each) are 3: 17, 17 and 6 (1 MiB each at most, under --max-request-bytes 1.5 MiB). etcd would
# refuse either as one request.
d bench-batch 300 300
assert_eq "$(field txns) $(field ok) $(field requests)" "300 300 3" "300 txns queued at once ($R)"
d bench-batch 40 40 30000
assert_eq "$(field txns) $(field ok) $(field requests)" "40 40 3" "40 large txns queued at once ($R)"

# ---- leases: keepalive keeps keys past their TTL; without it they vanish ----
ttl=$((2 * TIME_SCALE))
d grant "$ttl"
lease=$(field id)
granted=$(field ttl)
assert_ok "a lease granted ($R)" [ "$lease" -gt 0 ] && [ "$granted" -ge "$ttl" ]
d put /it/l/1 a @lease
d put /it/l/2 b @lease
d keepalive-for $((2 * granted)) $((granted * 1000 / 4))
assert_ok "keepalives for twice the TTL ($R)" [ "$(field n)" -ge 4 ] && [ "$(field ttl)" -gt 0 ]
d prefix /it/l/
assert_eq "$(kv_lines)" "/it/l/1 a,/it/l/2 b" "keys under the kept lease, twice its TTL later"
keys_gone() { d prefix /it/l/; [ -z "$(kv_lines)" ]; }
t0=$(date +%s%N)
wait_until $((3 * granted + 5 * TIME_SCALE)) "the lease's keys gone" keys_gone
gone_ms=$((($(date +%s%N) - t0) / 1000000))
note "lease keys gone ${gone_ms} ms after the last keepalive (TTL ${granted} s)"
d keepalive "$lease"
assert_eq "$(field ttl)" 0 "keepalive of the expired lease"
d grant "$ttl"
d revoke
ok_result

# ---- many leases, one LeaseKeepAlive stream: each keepalive a message on it ----
# ka_metric started|msg_received MEMBER...: etcd's own count (its /metrics) of LeaseKeepAlive
# streams started, or of their messages received, on those members together.
ka_metric() {
        local what=$1 i v n=0
        shift
        for i in "$@"; do
                v=$(curl -sf -m 2 "${ETCD_CURL_TLS[@]}" "$(etcd_url "${ETCD_CLIENT_PORT[i]}")/metrics" |
                        sed -nE "s/^grpc_server_${what}_total\{grpc_method=\"LeaseKeepAlive\".*\} ([0-9]+)\$/\1/p")
                n=$((n + ${v:-0}))
        done
        echo "$n"
}
d leases 200 "$ttl"
assert_eq "$(field n)" 200 "leases granted, a key under each ($R)"
streams0=$(ka_metric started 1 2 3)
msgs0=$(ka_metric msg_received 1 2 3)
d keepalive-many $((2 * granted)) $((granted * 1000 / 4))
rounds=$(field rounds)
assert_ok "rounds of 200 keepalives at once for twice the TTL ($R)" [ "$rounds" -ge 4 ]
assert_eq "$(field ok) $(field errors) $(field expired)" "$((200 * rounds)) 0 0" \
        "200 leases' keepalives answered ($R)"
msgs=$(($(ka_metric msg_received 1 2 3) - msgs0))
streams=$(($(ka_metric started 1 2 3) - streams0))
note "$((200 * rounds)) keepalives: $msgs LeaseKeepAlive messages on $streams new stream(s)"
assert_ok "etcd received each as a message ($msgs for $((200 * rounds)))" \
        [ "$msgs" -ge $((200 * rounds)) ]
assert_ok "on the client's one stream, opened before or now ($streams new)" [ "$streams" -le 1 ]
d prefix /it/many/ 1
assert_eq "$(field count)" 200 "keys under the 200 kept leases, twice their TTL later"
# A keepalive cancelled at once: no callback; etcd's answer to it is dropped, and the next
# keepalive of the lease gets its own.
d grant "$ttl"
d keepalive-cancel
assert_eq "$(field ttl) $(field cancelled_called)" "$granted 0" "the keepalive after a cancelled one ($R)"
d revoke
ok_result

# ---- watches: order, history, compaction ----
d watch w prefix:/it/w/
assert_ok "watch created ($R)" grep -q "^watch w created" <<<"$R"
d put /it/w/1 a
first=$(field rev)
d put /it/w/2 b
d del /it/w/1
d wait w 3 $((10 * TIME_SCALE))
assert_eq "$(field events)" 3 "events seen by the watch"
assert_eq "$(events w)" "PUT /it/w/1 a,PUT /it/w/2 b,DELETE /it/w/1 -" "the events, in order"
d watch h /it/w/1 "$first"
d wait h 2 $((10 * TIME_SCALE))
assert_eq "$(events h)" "PUT /it/w/1 a,DELETE /it/w/1 -" "a watch from a past revision replays it"
d unwatch h
d put /it/w/3 c
now_rev=$(field rev)
ectl compact "$now_rev" >/dev/null
d watch old prefix:/it/w/ "$first"
d wait old 1 $((10 * TIME_SCALE))
assert_ok "a watch from a compacted revision ends with ESTALE ($(grep '^watch-error old' "$LOG"))" \
        grep -q "^watch-error old ESTALE c=$now_rev\$" "$LOG"
assert_eq "$(events old)" "" "no events from the compacted watch"
d unwatch old

# A stream's messages cut across HTTP/2 frames (16 KiB each) and delivered whole: three events
# of 300,000 bytes each, back to back.
d watch big prefix:/it/big/
head -c 300000 /dev/zero | tr '\0' x > "$T/big"
for i in 1 2 3; do ectl put "/it/big/$i" < "$T/big" >/dev/null; done
d wait big 3 $((10 * TIME_SCALE))
assert_eq "$(field events)" 3 "the large events seen by the watch"
assert_eq "$(awk '$1 == "event" && $2 == "big" && $3 == "PUT" && length($5) == 300000' "$LOG" |
        wc -l)" 3 "each large value whole"
d unwatch big

# ---- a member stopped: the watch on it ends; a new one works once it is back ----
# A member hung or stopped (SIGSTOP) still has its kernel acknowledge TCP's keepalive probes:
# only the client's HTTP/2 PINGs (etcd-h2.c: one after 10 s without a byte read, the
# connection's end 5 s later) end its watch, which the caller must see rather than wait on
# forever. A second client, on member 2 alone (the first keeps its connection to member 1), fed
# through a FIFO so that the member stops and comes back between its commands.
STOPPED_PID=
# A test that failed with member 2 stopped leaves no stopped etcd (before etcd_cleanup's kill).
cont_stopped() { [ -z "$STOPPED_PID" ] || kill -CONT "$STOPPED_PID" 2>/dev/null; return 0; }
CLEANUP_HOOKS=(cont_stopped "${CLEANUP_HOOKS[@]}")
# drive_on I NAME: an etcd-drive on member I alone, fed through the fifo $T/NAME.in (its
# descriptor ON_FD), answering into $T/NAME.out; its PID ON_PID, tracked.
drive_on() {
        mkfifo "$T/$2.in"
        ETCD_TIMEOUT_MS=$TIMEOUT_MS ETCD_ENDPOINTS=$(etcd_url "${ETCD_CLIENT_PORT[$1]}") \
                "$ETCD_DRIVE" <"$T/$2.in" >"$T/$2.out" 2>&1 &
        ON_PID=$!
        bg_track "$ON_PID"
        exec {ON_FD}>"$T/$2.in"
}
drive_on 2 s
s_pid=$ON_PID S_IN=$ON_FD
echo "watch s prefix:/it/s/" >&"$S_IN"
wait_until $((10 * TIME_SCALE)) "the watch on member 2 created" grep -q "^watch s created" "$T/s.out"
echo "wait s 1 $((60 * TIME_SCALE))" >&"$S_IN"
STOPPED_PID=${ETCD_PID[2]}
etcd_kill 2 STOP
t0=$(date +%s%N)
wait_until $((20 + 5 * TIME_SCALE)) "the watch on the stopped member 2 ended" \
        grep -q "^watch s ended" "$T/s.out"
note "the watch on the stopped member ended $((($(date +%s%N) - t0) / 1000000)) ms after its SIGSTOP"
assert_ok "it ended with ECONNRESET ($(cat "$T/s.out"))" grep -q "^watch-error s ECONNRESET" "$T/s.out"
assert_ok "with no event ($(cat "$T/s.out"))" grep -q "^watch s ended events=0" "$T/s.out"
kill -CONT "$STOPPED_PID"
STOPPED_PID=
etcd_wait_healthy 1 2 3
echo "watch s2 prefix:/it/s/" >&"$S_IN"
wait_until $((10 * TIME_SCALE)) "a new watch on member 2, back" grep -q "^watch s2 created" "$T/s.out"
echo "wait s2 1 $((10 * TIME_SCALE))" >&"$S_IN"
ectl put /it/s/1 back >/dev/null
wait_until $((15 * TIME_SCALE)) "the new watch's event" grep -q "^watch s2 done events=1" "$T/s.out"
assert_ok "the new watch's event ($(cat "$T/s.out"))" grep -q "^event s2 PUT /it/s/1 back " "$T/s.out"
exec {S_IN}>&-
wait "$s_pid" || fail "the client on member 2 exited with $?: $(cat "$T/s.out")"
bg_untrack "$s_pid"
# Meanwhile the first client's watch on member 1 stayed open and quiet for as long: its PINGs
# were answered, and etcd took them for no abuse (no GOAWAY "too_many_pings").
d put /it/w/5 e
d wait w 5 $((10 * TIME_SCALE))
assert_eq "$(field events)" 5 "events seen by the watch, open all along ($R)"
assert_eq "$(grep -c '^watch-error w ' "$LOG" || true)" 0 "errors on the watch open all along"

# ---- one member killed: requests go on through the others, the watch on it breaks ----
d watch m prefix:/it/m/
d put /it/m/1 before
ok_result
d wait m 1 $((10 * TIME_SCALE))
# Member 1 (the client's first endpoint, where it is connected) dies while member 3 leads: no
# election, so every request must succeed at its first try, through another endpoint.
etcd_make_leader 3
# First with a batch in flight: member 1 stopped, so that the batch (a read and a write) waits
# unread in its socket, then killed (the connection resets). The write fails (ECONNRESET: its
# outcome unknown, it is never sent again; here it was never read), the read goes again in
# the next batch, to member 2, and is answered.
# The bytes unread in member 1's sockets; the batch's are more than 50 (its HEADERS and DATA
# frames), which HTTP/2's own small frames (a PING's acknowledgement, 17) are not.
unread_on_1() {
        ss -tnH state established "( sport = :${ETCD_CLIENT_PORT[1]} )" |
                awk '{ n += $1 } END { print n + 0 }'
}
request_waits_on_1() { [ "$(unread_on_1)" -ge $((unread_before + 50)) ]; }
etcd_kill 1 STOP
unread_before=$(unread_on_1)
d_send "batch then get:/it/m/1 ; create:/it/m/lost:=:0 then put:/it/m/lost:x" \
        "(member 1 stopped, then killed)"
wait_until $((10 * TIME_SCALE)) "the batch waiting in member 1's socket" request_waits_on_1
etcd_kill 1
d_read batch
assert_eq "$(field txns) $(field requests)" "2 2" "the batch, and its read sent again ($R)"
assert_ok "the write in the broken request failed ($(nested_line 1))" \
        grep -q "^batched 1 error ECONNRESET " <<<"$(nested_line 1)"
assert_ok "the read in it was sent again and answered ($(nested_line 0))" \
        grep -q "^batched 0 succeeded=1 " <<<"$(nested_line 0)"
assert_eq "$(kv_lines)" "/it/m/1 before" "the read's answer"
d get /it/m/lost
assert_eq "$(kv_lines)" "" "the write member 1 never read"
d put /it/m/2 after
ok_result
d get /it/m/2
assert_eq "$(kv_lines)" "/it/m/2 after" "a read with member 1 dead"
d wait m 2 $((10 * TIME_SCALE))
assert_ok "the watch on the killed member ends with ECONNRESET ($R)" \
        grep -q "^watch-error m ECONNRESET" "$LOG"
d watch m2 prefix:/it/m/
assert_ok "a new watch on a live member ($R)" grep -q "^watch m2 created" <<<"$R"
d txn create:/it/m/3:=:0 then put:/it/m/3:x
assert_eq "$(field succeeded)" 1 "a txn with member 1 dead"
d wait m2 1 $((10 * TIME_SCALE))
assert_eq "$(events m2)" "PUT /it/m/3 x" "the new watch's event"

# ---- quorum lost: every request fails within its timeout, none hangs ----
# A second client, on member 3 alone, watches: member 3 survives but loses its leader, and
# etcd ends the watch for that ("hasleader"), which a client must see rather than wait on a
# silent stream forever.
printf 'watch q prefix:/it/\nwait q 1 %s\n' $((60 * TIME_SCALE)) |
        ETCD_ENDPOINTS=$(etcd_url "${ETCD_CLIENT_PORT[3]}") "$ETCD_DRIVE" >"$T/q.out" 2>&1 &
q_pid=$!
bg_track "$q_pid"
wait_until $((10 * TIME_SCALE)) "the watch on member 3 created" grep -q "^watch q created" "$T/q.out"
etcd_kill 2
for cmd in "put /it/q/1 x" "get /it/m/2" "txn create:/it/q/2:=:0 then put:/it/q/2:y"; do
        d $cmd
        assert_ok "'$cmd' without quorum fails with ETIMEDOUT ($R)" grep -q "^error ETIMEDOUT" <<<"$R"
        assert_between "$(field ms)" $((TIMEOUT_MS - 50)) $((TIMEOUT_MS + 1000 * TIME_SCALE)) \
                "ms before '$cmd' failed"
done
d wait m2 2 $((10 * TIME_SCALE))
assert_ok "the watch ends when its member died or lost the quorum ($R)" \
        grep -q "^watch-error m2 ECONNRESET" "$LOG"

wait_until $((30 * TIME_SCALE)) "the watch on member 3 ended for want of a leader" \
        grep -q "^watch-error q ECONNRESET" "$T/q.out"
assert_ok "the watch on member 3 saw no event ($(cat "$T/q.out"))" grep -q "^watch q ended events=0" "$T/q.out"
wait "$q_pid"
bg_untrack "$q_pid"

# ---- quorum back: the same client succeeds again ----
etcd_start_member 2
etcd_wait_healthy 2 3
quorum_back() { d put /it/q/1 back; [[ $R == ok* ]]; }
wait_until $((20 * TIME_SCALE)) "a put through the same client after the quorum returned" quorum_back
d get /it/m/3
assert_eq "$(kv_lines)" "/it/m/3 x" "what was written before the quorum was lost"
d get /it/q/2
assert_eq "$(kv_lines)" "" "the txn that timed out without quorum was not applied"

# ---- the LeaseKeepAlive stream's member restarted ----
# The member is stopped, then killed with a round of keepalives waiting in its socket: the
# client's go to another member (no election: another one leads) on a new stream, and so do
# the next ones; a second client, on that member alone, fails while it is down and keeps its
# leases alive again on a new stream once it is back.
etcd_start_member 1
etcd_wait_healthy 1 2 3
ttl=$((5 * TIME_SCALE))
d leases 100 "$ttl" /it/r/
assert_eq "$(field n)" 100 "leases for the restart ($R)"
for i in 1 2 3; do before[i]=$(ka_metric msg_received "$i"); done
d keepalive-many 0 0
victim=
for i in 1 2 3; do
        [ $(($(ka_metric msg_received "$i") - before[i])) -lt 100 ] || victim=$i
done
assert_ok "one member took the round of 100 keepalives on its stream ($R)" [ -n "$victim" ]
etcd_make_leader $((victim % 3 + 1))
printf 'leases 20 %s /it/b/\nkeepalive-many %s %s\n' $((10 * TIME_SCALE)) $((4 * ttl)) \
        $((1000 * TIME_SCALE)) | ETCD_ENDPOINTS=$(etcd_url "${ETCD_CLIENT_PORT[victim]}") \
        ETCD_TIMEOUT_MS=$TIMEOUT_MS "$ETCD_DRIVE" >"$T/b.out" 2>&1 &
b_pid=$!
bg_track "$b_pid"
wait_until $((10 * TIME_SCALE)) "the second client's leases" grep -q "^leases n=20 " "$T/b.out"
for i in 1 2 3; do started[i]=$(ka_metric started "$i"); done
period_ms=$((1000 * TIME_SCALE))
d_send "keepalive-many $((3 * ttl)) $period_ms rounds" "(member $victim restarted meanwhile)"
msgs0=$(ka_metric msg_received "$victim")
kept_on_victim() { [ $(($(ka_metric msg_received "$victim") - msgs0)) -ge 120 ]; }
wait_until $((10 * TIME_SCALE)) "a round of both clients on member $victim" kept_on_victim
# The stop comes between two of this client's rounds, just after one ended in less than half a
# period: a round the stop caught half answered would time out (after 1 s x TIME_SCALE, the
# client's request timeout) before the kill below could send it to another member.
d_round_ended() {
        local line deadline=$((EPOCHSECONDS + 30 * TIME_SCALE))
        while IFS= read -r -t $((30 * TIME_SCALE)) line <&"$DRIVE_OUT"; do
                echo "$line" >>"$LOG"
                [[ $line =~ ^round\ .*\ took_ms=([0-9]+)$ ]] &&
                        [ "${BASH_REMATCH[1]}" -lt $((period_ms / 2)) ] && return 0
                [ "$EPOCHSECONDS" -lt "$deadline" ] || break
        done
        fail "no round of keepalives ended within half a period ($period_ms ms); log: $(tail -n 20 "$LOG")"
}
d_round_ended
# the bytes unread in the member's sockets (Recv-Q): a round of 100 keepalives is over 1,600
unread_on() {
        ss -tnH state established "( sport = :${ETCD_CLIENT_PORT[$1]} )" |
                awk '{ n += $1 } END { print n + 0 }'
}
etcd_kill "$victim" STOP
unread0=$(unread_on "$victim")
round_waits() { [ "$(unread_on "$victim")" -ge $((unread0 + 1600)) ]; }
wait_until $((10 * TIME_SCALE)) "a round of keepalives waiting on stopped member $victim" round_waits
etcd_kill "$victim"
etcd_start_member "$victim"
etcd_wait_healthy 1 2 3
d_read keepalive-many
assert_eq "$(field errors) $(field expired) $(field last)" "0 0 100" \
        "keepalives through member $victim's restart, sent again to another ($R)"
reopened=0
for i in 1 2 3; do
        [ "$i" = "$victim" ] || reopened=$((reopened + $(ka_metric started "$i") - started[i]))
done
assert_ok "a new LeaseKeepAlive stream on another member ($reopened)" [ "$reopened" -ge 1 ]
d prefix /it/r/ 1
assert_eq "$(field count)" 100 "keys under the leases kept through the restart"
wait "$b_pid" || fail "the client on member $victim exited with $?: $(cat "$T/b.out")"
bg_untrack "$b_pid"
b_line=$(grep "^kept-many " "$T/b.out" || true)
note "the client on member $victim alone, through its restart: $b_line"
assert_eq "$(sed -nE 's/.* expired=([0-9]+) last=([0-9]+) .*/\1 \2/p' <<<"$b_line")" "0 20" \
        "the client on member $victim alone: its last round all answered, no lease lost ($b_line)"
assert_ok "its round waiting on the stopped member failed ($b_line)" \
        [ "$(sed -nE 's/.* errors=([0-9]+) .*/\1/p' <<<"$b_line")" -ge 20 ]
assert_ok "on a new stream to member $victim, restarted ($(ka_metric started "$victim"))" \
        [ "$(ka_metric started "$victim")" -ge 1 ]

# ---- a keepalive timed out on a stopped member, answered late ----
# A client on that member alone: its keepalive times out while the member is stopped; etcd's
# late answer to it, once the member runs again, is dropped (no second callback), and each of
# the next two keepalives gets an answer of its own.
drive_on "$victim" c
c_pid=$ON_PID C_IN=$ON_FD
echo "grant $((10 * TIME_SCALE))" >&"$C_IN"
wait_until $((10 * TIME_SCALE)) "a lease for the late answer" grep -q "^lease id=" "$T/c.out"
STOPPED_PID=${ETCD_PID[victim]}
etcd_kill "$victim" STOP
echo keepalive >&"$C_IN"
wait_until $((5 * TIME_SCALE)) "the keepalive on the stopped member timed out" \
        grep -q "^error ETIMEDOUT" "$T/c.out"
kill -CONT "$STOPPED_PID"
STOPPED_PID=
printf 'keepalive\nkeepalive\n' >&"$C_IN"
exec {C_IN}>&-
wait "$c_pid" || fail "the client on member $victim exited with $?: $(cat "$T/c.out")"
bg_untrack "$c_pid"
assert_eq "$(grep -c '^keepalive ttl=' "$T/c.out") $(grep -c '^error ' "$T/c.out")" "2 1" \
        "answers after the timed-out keepalive ($(paste -sd, "$T/c.out"))"
assert_ok "both with the lease's TTL ($(paste -sd, "$T/c.out"))" \
        [ "$(grep -c "^keepalive ttl=$((10 * TIME_SCALE)) " "$T/c.out")" -eq 2 ]

exec {DRIVE_IN}>&-
wait "$drive_pid" || fail "etcd-drive exited with $?: $(cat "$T/drive.err")"
bg_untrack "$drive_pid"
[ ! -s "$T/drive.err" ] || fail "etcd-drive's stderr: $(cat "$T/drive.err")"
finish
