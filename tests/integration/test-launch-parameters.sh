#!/usr/bin/env bash
# Multiplay's launch parameters (issue 26 point 2): a build configuration's args written as
# Multiplay writes them ($$port$$, $$query_port$$, $$log_dir$$ and its own $$map$$) reach the
# server expanded, every server variable with Multiplay's meaning; environment expands them
# too, $$commandline$$ included; server.json carries the configuration's variables; an
# unknown $$name$$ is refused by --check with file:line.
. "$(dirname "$0")/lib.sh"

write_config
# Single quotes: $$ is text here, not the shell's PID.
write_fleet mp "servers = 1" "[ports]" "game_base = 26300" "query_base = 26350" \
        "[build_configuration 42]" \
        'args = -port $$port$$ -queryport $$query_port$$ -log $$log_dir$$ -map $$map$$ -exe $$game_exe$$ -ids $$serverid$$/$$machineid$$/$$fleetid$$ -region "$$regionid$$|$$regionname$$" -ip $$ip$$ -ipv6=$$ipv6$$ -qt $$query_type$$ -dirs $$file_dir$$:$$config_dir$$ -ts $$timestamp$$ -mixed ${PORT}=$$port$$ -cost $$ -dollars $$$port$$' \
        'environment = CMD=$$commandline$$ MAP=$$map$$' \
        "query = a2s" "variables.map = de_dust2" "variables.mode = ctf"
fleet_key mp "build_configuration = 42"
fleet_key mp "region_id = eu-west-1"
fleet_key mp "region_name = Europe West"

before=$(date +%s)
start_slotd
A=$(list_slots | awk '$2 == "mp" { print $1 }')
wait_prop $A ProcessState running
after=$(date +%s)
pid=$(sprop $A MainPID)
home=$(sprop $A Home)
port=$(sprop $A Port)
qport=$(sprop $A QueryPort)
assert_eq "$port" 26300 "the slot's port"

# 1. argv, word by word, against what Multiplay's variables mean for this server.
python3 - /proc/$pid/cmdline "$TEST_SERVER" "$port" "$qport" "$home" "$A" \
        "$TEST_MACHINE_NUMBER" "$before" "$after" <<'PY' || fail "argv of the server"
import os, sys
cmdline, exe, port, qport, home, sid, machine, before, after = sys.argv[1:]
argv = open(cmdline, "rb").read().split(b"\0")[:-1]
argv = [a.decode() for a in argv]
ts = argv[argv.index("-ts") + 1]
assert ts.isdigit() and int(before) <= int(ts) <= int(after), (ts, before, after)
expect = [exe,
          "-port", port, "-queryport", qport, "-log", home + "/logs", "-map", "de_dust2",
          "-exe", os.path.basename(exe), "-ids", f"{sid}/{machine}/mp",
          "-region", "eu-west-1|Europe West", "-ip", "192.0.2.1", "-ipv6=", "-qt", "a2s",
          "-dirs", f"{home}:{home}", "-ts", ts, "-mixed", f"{port}={port}", "-cost", "$$",
          "-dollars", f"${port}"]
assert argv == expect, (argv, expect)
PY
PASSED=$((PASSED + 1))
assert_eq "$(server_json $A serverLogDir)" "$home/logs" "\$\$log_dir\$\$ is server.json's serverLogDir"
assert_eq "$(server_json $A serverFilesDir)" "$home" "\$\$file_dir\$\$ is server.json's serverFilesDir"
assert_eq "$(server_json $A machineID)" "$TEST_MACHINE_NUMBER" "\$\$machineid\$\$ is server.json's machineID"

# 2. The environment: $$commandline$$ is the expanded args, joined by spaces.
python3 - /proc/$pid/environ /proc/$pid/cmdline <<'PY' || fail "environment of the server"
import sys
env = dict(e.decode().split("=", 1) for e in open(sys.argv[1], "rb").read().split(b"\0") if e)
argv = [a.decode() for a in open(sys.argv[2], "rb").read().split(b"\0")[:-1]]
assert env["MAP"] == "de_dust2", env["MAP"]
assert env["CMD"] == " ".join(argv[1:]), (env["CMD"], argv)
assert env["PORT"] == argv[2], env["PORT"]
PY
PASSED=$((PASSED + 1))

# 3. server.json carries the configuration's variables as strings, as Multiplay does.
assert_eq "$(server_json $A map)" de_dust2 "variable map in server.json"
assert_eq "$(server_json $A mode)" ctf "variable mode in server.json"
assert_eq "$(server_json $A port)" "$port" "port in server.json"

# 4. An unknown $$name$$ is refused by --check, naming the file, the line and the variable;
# so is an unterminated one.
mkdir -p "$T/bad.d"
printf '[fleet]\nbuild = %s\n[usage]\ncpu = 1\nmemory = 64M\n[build_configuration 7]\nargs = -map $$nope$$\nvariables.map = x\n' \
        "$TEST_SERVER" > "$T/bad.d/bad.ini"
out=$("$SLOTD" --check --config "$T/etc/slotd.ini" --fleets "$T/bad.d" 2>&1) &&
        fail "--check accepted an unknown \$\$nope\$\$"
assert_ok "--check names file:line and \$\$nope\$\$ ($out)" \
        grep -qF "$T/bad.d/bad.ini:7: build_configuration 7.args: unknown variable '\$\$nope\$\$'" <<<"$out"
printf '[fleet]\nbuild = %s\nargs = -port $$port\n[usage]\ncpu = 1\nmemory = 64M\n' \
        "$TEST_SERVER" > "$T/bad.d/bad.ini"
out=$("$SLOTD" --check --config "$T/etc/slotd.ini" --fleets "$T/bad.d" 2>&1) &&
        fail "--check accepted an unterminated \$\$port"
assert_ok "--check names the unterminated \$\$port ($out)" \
        grep -qF "$T/bad.d/bad.ini:3: fleet.args: unterminated '\$\$port'" <<<"$out"

# 5. Density from usage settings (issue 26 point 3), as --check prints it: on 4 cores of
# 2000 MHz (8000 MHz), fleet fast needs 3000 MHz a server (2 alone) and fleet many 0.25 cores
# with at most 6 a machine; together they fit (2 × 1 + 6 × 0.25 = 3.5 cores), so each gets
# all it asks, whichever file comes first.
mkdir -p "$T/dens.d"
sed 's/^cpus = .*/cpus = 4\ncpu_mhz = 2000/' "$T/etc/slotd.ini" > "$T/dens.ini"
printf '[fleet]\nbuild = %s\n[usage]\ncpu = 1\nmemory = 64M\nspeed = 3000\n[ports]\ngame_base = 26400\nquery_base = 26450\n' \
        "$TEST_SERVER" > "$T/dens.d/a-fast.ini"
printf '[fleet]\nbuild = %s\n[usage]\ncpu = 0.25\nmemory = 64M\nmax_per_machine = 6\n[ports]\ngame_base = 26410\nquery_base = 26460\n' \
        "$TEST_SERVER" > "$T/dens.d/b-many.ini"
out=$("$SLOTD" --check --config "$T/dens.ini" --fleets "$T/dens.d" 2>&1) ||
        fail "--check of two automatic fleets: $out"
assert_ok "--check: the machine's MHz ($out)" \
        grep -qF "density: for servers 4 cores, 4G, 8000 MHz (2000 MHz a core, machine.cpu_mhz)" <<<"$out"
assert_ok "--check: fleet fast by speed" \
        grep -qF "density: fleet a-fast: 2 slots (automatic, all it can take); per server 1 cores, 64M, 3000 MHz; on the whole machine: cpu floor(4 / 1) = 4, memory floor(4G / 64M) = 64, speed floor(8000 MHz / 3000 MHz) = 2" <<<"$out"
assert_ok "--check: fleet many by max_per_machine" \
        grep -qF "density: fleet b-many: 6 slots (automatic, all it can take)" <<<"$out"
# Two automatic fleets that ask for the whole machine split it (before, the second got none).
printf '[fleet]\nbuild = %s\n[usage]\ncpu = 0.25\nmemory = 64M\n[ports]\ngame_base = 26410\nquery_base = 26460\n' \
        "$TEST_SERVER" > "$T/dens.d/b-many.ini"
sed -i 's/^speed = 3000$/max_per_core = 8/' "$T/dens.d/a-fast.ini"
out=$("$SLOTD" --check --config "$T/dens.ini" --fleets "$T/dens.d" 2>&1) ||
        fail "--check of two greedy fleets: $out"
assert_ok "--check: fair shares ($out)" grep -qF "(more than that asked: fair shares)" <<<"$out"
assert_ok "--check: a-fast gets half the cores" grep -qF "density: fleet a-fast: 2 slots" <<<"$out"
assert_ok "--check: b-many gets the other half" grep -qF "density: fleet b-many: 8 slots" <<<"$out"

finish
