#!/usr/bin/env bash
# server.json and the announcement of an allocation (SPEC §4): allocatedUUID is rewritten in
# place (same inode, no rename) before SlotChanged / PropertiesChanged announce the change,
# for Allocate, Deallocate, a slot's own Allocate / Deallocate, and the end of a session by
# exit 0.
#
# One python process watches server.json with inotify and reads slotd's signals from
# `busctl monitor`. Whenever a signal about the slot arrives, it first drains the inotify
# queue and reads server.json, then logs the signal. If slotd wrote server.json before it sent
# the signal, the write's IN_MODIFY is in the queue and the new content in the file by the
# time the signal is read, however the processes are scheduled: a failure is never a race of
# the test. (A daemon doing it the wrong way round may still pass by luck in one run.)
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=2 write_config
write_fleet game "servers = 1" "[ports]" "game_base = 25600" "query_base = 25650"
start_slotd
wait_prop 0 ProcessState running
HOME0=$(sprop 0 Home)
inode=$(stat -c %i "$HOME0/server.json")
: > "$T/mark"

cat > "$T/watch.py" <<'PY'
import ctypes, json, os, select, struct, subprocess, sys, time
home, sid, bus, out, mark = sys.argv[1:]
sid = int(sid)
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF = 0x400, 0x800
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0o4000 | 0o2000000)  # IN_NONBLOCK | IN_CLOEXEC
def watch(path, mask):
    w = libc.inotify_add_watch(fd, path.encode(), mask)
    assert w >= 0, (path, ctypes.get_errno())
    return w
wf = watch(home + "/server.json", IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF)
wd = watch(home, IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE)
wm = watch(mark, IN_CLOSE_WRITE)
log = open(out, "w", buffering=1)
def drain():
    while True:
        try:
            buf = os.read(fd, 65536)
        except BlockingIOError:
            return
        i = 0
        while i < len(buf):
            w, mask, _, n = struct.unpack_from("iIII", buf, i)
            name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode()
            i += 16 + n
            t = time.monotonic_ns()
            if w == wm:
                log.write(f"{t} MARK {open(mark).read().strip()}\n")
            elif w == wf:
                log.write(f"{t} FILE {mask:#x}\n")
            elif w == wd and name == "server.json":
                log.write(f"{t} DIR {mask:#x}\n")
p = subprocess.Popen(["busctl", "--address=" + bus, "--json=short", "monitor", "--match",
                      "type='signal',sender='org.slotd.Supervisor1'"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
bufs = {p.stdout.fileno(): b"", p.stderr.fileno(): b""}
while True:
    ready, _, _ = select.select([fd, p.stdout.fileno(), p.stderr.fileno()], [], [])
    drain()
    for f in ready:
        if f == fd:
            continue
        data = os.read(f, 65536)
        if not data:
            sys.exit(0)
        bufs[f] += data
        while b"\n" in bufs[f]:
            line, bufs[f] = bufs[f].split(b"\n", 1)
            if f == p.stderr.fileno():
                if b"Monitoring bus" in line:
                    log.write("0 ATTACHED\n")
                continue
            m = json.loads(line)
            d = m.get("payload", {}).get("data", [])
            if m.get("member") == "SlotChanged" and d and d[0] == sid:
                info = f"SlotChanged state={d[1]} process={d[2]}"
            elif m.get("member") == "PropertiesChanged" and m.get("path") == f"/org/slotd/Supervisor1/slot/{sid}":
                props = d[1]
                info = "PropertiesChanged state=%s uuid=%s" % (
                    props.get("State", {}).get("data", "?"), props.get("AllocationUUID", {}).get("data", "?"))
            else:
                continue
            drain()  # every write done before the signal was sent is in the queue by now
            # A later rewrite (the restart after an exit 0 writes server.json again) may be
            # caught between its truncation and its write: read again until it is whole.
            for attempt in range(100):
                try:
                    content = json.load(open(home + "/server.json"))["allocatedUUID"]
                    break
                except Exception as e:
                    content = "unreadable:" + type(e).__name__
                    time.sleep(0.002)
            log.write(f"{time.monotonic_ns()} SIGNAL {info} json={content}\n")
PY
python3 "$T/watch.py" "$HOME0" 0 "$BUS" "$T/order.log" "$T/mark" &
bg_track $!
wait_until 10 "watcher attached" grep -q ATTACHED "$T/order.log"

# check_phase N KIND UUID: after "MARK N", the first signal announcing the change (KIND
# alloc: to UUID; dealloc: UUID gone) comes after an IN_MODIFY of server.json and finds
# server.json already saying so.
check_phase() {
        python3 - "$T/order.log" "$@" <<'PY' || fail "phase $1 ($2 $3): see $T/order.log above"
import sys
log, n, kind, uuid = sys.argv[1:]
lines = [l.split(" ", 2) for l in open(log).read().splitlines()]
start = next(i for i, l in enumerate(lines) if l[1] == "MARK" and l[2] == n)
modified = False
for t, what, rest in lines[start + 1:]:
    if what == "FILE" and int(rest, 16) & 0x2:
        modified = True
    if what != "SIGNAL":
        continue
    if kind == "alloc":
        announces = "state=allocated" in rest or f"uuid={uuid} " in rest
    else:
        announces = "uuid= " in rest or ("SlotChanged" in rest and "state=allocated" not in rest)
    if not announces:
        continue
    want = uuid if kind == "alloc" else ""
    ok = modified and rest.endswith(f" json={want}")
    if not ok:
        sys.stderr.write(open(log).read())
        sys.stderr.write(f"first announcement: {rest!r}; IN_MODIFY before it: {modified}\n")
    sys.exit(0 if ok else 1)
sys.stderr.write(open(log).read() + "no announcement found\n")
sys.exit(1)
PY
        PASSED=$((PASSED + 1))
}
mark() { echo "$1" > "$T/mark"; wait_until 10 "mark $1 seen" grep -q " MARK $1\$" "$T/order.log"; }
signal_seen() { tail -n +"$(grep -n " MARK $1\$" "$T/order.log" | cut -d: -f1)" "$T/order.log" | grep -q "$2"; }

# 1. Manager Allocate: written before announced; the reply finds it written too.
mark 1
assert_eq "$(allocate game u-1)" 0 "Allocate u-1"
assert_eq "$(server_json 0 allocatedUUID)" u-1 "server.json when Allocate returns"
wait_until 10 "allocation announced" signal_seen 1 "state=allocated"
check_phase 1 alloc u-1
wait_until 10 "the server read u-1 from the rewritten file" server_state_is 0 allocatedUUID u-1

# 2. Manager Deallocate.
mark 2
mcall Deallocate s u-1
assert_eq "$(server_json 0 allocatedUUID)" "" "server.json when Deallocate returns"
wait_until 10 "deallocation announced" signal_seen 2 "uuid= "
check_phase 2 dealloc u-1
wait_until 10 "the server read ''" server_state_is 0 allocatedUUID ""

# 3. The slot's own Allocate and Deallocate.
mark 3
scall 0 Allocate ss u-2 ""
wait_until 10 "allocation announced" signal_seen 3 "state=allocated"
check_phase 3 alloc u-2
mark 4
scall 0 Deallocate
wait_until 10 "deallocation announced" signal_seen 4 "uuid= "
check_phase 4 dealloc u-2

# 4. A session ended by exit 0: cleared before the deallocation is announced.
allocate game u-3 >/dev/null
wait_until 10 "the server read u-3" server_state_is 0 allocatedUUID u-3
pid=$(sprop 0 MainPID)
mark 5
control 0 "exit 0"
wait_new_pid 0 "$pid"
wait_until 10 "deallocation announced" signal_seen 5 "uuid= "
check_phase 5 dealloc u-3

# 5. Always the same file: no rename into place, no new inode.
assert_eq "$(stat -c %i "$HOME0/server.json")" "$inode" "inode of server.json"
assert_eq "$(grep -c " DIR " "$T/order.log" || true)" 0 "server.json created, moved or deleted"
self_moves=0
while read -r _ what mask _; do
        if [ "$what" = FILE ] && (( mask & 0xc00 )); then self_moves=$((self_moves + 1)); fi
done < "$T/order.log"
assert_eq "$self_moves" 0 "IN_DELETE_SELF / IN_MOVE_SELF on server.json"
assert_eq "$(stat -c %h "$HOME0/server.json")" 1 "one link"
finish
