#!/usr/bin/env bash
# The scaler's targets from a Multiplay .gsh file (issue 26 point 4; SPEC §13 "The scaler"):
# the allocator reads the studio's file ([scaler] gsh, a glob) and no allocator.ini targets.
# Fleet "my fleet" (slotd's my-fleet) has regions "North America" (minAvailable 2, maxServers
# 3) and "Europe" (minAvailable 1, maxServers 1); slotd --check reads the same file as fleet
# my-fleet in region "North America". Two real hosts of fleet-lib.sh (slotd, slotd-registry)
# run my-fleet as an INI fleet (a .gsh fleet's slots start on provision; these start stopped)
# with 4 slots each, host 1 in North America, host 2 in Europe. The scaler starts 2 servers in North America and 1 in Europe; an
# allocation in North America makes a third start; a second leaves it at 3 (the buffer would
# want 4: maxServers holds it); an allocation in Europe starts none (maxServers 1). The
# capacity view shows each region's buffer and ceiling from the file. Deleting the North
# America allocations stops the surplus one, back to 2. `slotd-allocator --check` prints each
# target with its file, line and column; a .gsh error is a start-up error naming them.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
[ -n "${SLOTD_REGISTRY:-}" ] && [ -x "$SLOTD_REGISTRY" ] || skip "slotd-registry is not built"
[ -n "${SLOTD_ALLOCATOR:-}" ] && [ -x "$SLOTD_ALLOCATOR" ] || skip "slotd-allocator is not built"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

FLEET_NAME=my-fleet
FLEET_SLOTS=4
FLEET_REGION_OF() { if [ "$1" = 1 ]; then echo "North America"; else echo Europe; fi; }
mkdir -p "$T/gsh"
chmod 755 "$T/gsh"
cat > "$T/gsh/game.gsh" <<'EOF_GSH'
version: 1.0
builds:
  my build:
    executableName: Server
    buildPath: Builds/Server
buildConfigurations:
  my build configuration:
    build: my build
    queryType: sqp
    commandLine: -port $$port$$ -queryport $$query_port$$ -log $$log_dir$$/Engine.log
fleets:
  my fleet:
    buildConfigurations:
      - my build configuration
    regions:
      North America:
        minAvailable: 2
        maxServers: 3
      Europe:
        minAvailable: 1
        maxServers: 1
    usageSettings:
      - hardwareType: METAL
        speed: 1000
        memory: 800
EOF_GSH
chmod 644 "$T/gsh/game.gsh"
FLEET_ALLOCATOR_EXTRA="[scaler]
gsh = $T/gsh/*.gsh
interval = 200ms"
SCALE_WITHIN=$((10 * TIME_SCALE))
. "$(dirname "$0")/fleet-lib.sh"

# ---- --check and a bad file, before anything runs ----
cat > "$T/check.ini" <<EOC
[etcd]
endpoints = http://127.0.0.1:2379
$FLEET_ALLOCATOR_EXTRA
EOC
out=$("$SLOTD_ALLOCATOR" --config "$T/check.ini" --check 2>&1) || fail "--check failed: $out"
echo "$out" | sed 's/^/# /'
assert_ok "--check shows North America's target and its place" grep -qxF \
        "scaler target \"my-fleet/North America\" buffer=2 floor=0 ceiling=3 ($T/gsh/game.gsh:16:7: fleets.my fleet.regions.North America)" <<<"$out"
assert_ok "--check shows Europe's target and its place" grep -qxF \
        "scaler target my-fleet/Europe buffer=1 floor=0 ceiling=1 ($T/gsh/game.gsh:19:7: fleets.my fleet.regions.Europe)" <<<"$out"
mkdir -p "$T/bad"
sed 's/maxServers: 1$/maxServers: lots/' "$T/gsh/game.gsh" > "$T/bad/game.gsh"
sed "s|$T/gsh/|$T/bad/|" "$T/check.ini" > "$T/bad.ini"
rc=0
out=$("$SLOTD_ALLOCATOR" --config "$T/bad.ini" --check 2>&1) || rc=$?
assert_eq "$rc" 2 "--check of a bad .gsh exits 2 ($out)"
assert_ok "its error names FILE:LINE:COLUMN" grep -qF \
        "$T/bad/game.gsh:21:21: fleets.my fleet.regions.Europe.maxServers: expected an integer" <<<"$out"

# slotd reads the same file as fleet my-fleet in the region of its machine.region: the names
# the hosts below register (their INI fleet, whose slots can start stopped) and the allocator's
# targets use.
mkdir -p "$T/slotd-check/fleets.d" "$T/slotd-check/builds/Builds/Server"
ln -s "$TEST_SERVER" "$T/slotd-check/builds/Builds/Server/Server"
cp "$T/gsh/game.gsh" "$T/slotd-check/fleets.d/"
cat > "$T/slotd-check/slotd.ini" <<EOC
[machine]
region = North America
cpus = 4
memory = 8G
[supervisor]
builds_dir = $T/slotd-check/builds
EOC
out=$("$SLOTD" --check --config "$T/slotd-check/slotd.ini" 2>&1) || fail "slotd --check failed: $out"
assert_ok "slotd --check: fleet my-fleet from game.gsh" \
        grep -q "^fleet my-fleet ($T/slotd-check/fleets.d/game.gsh): [1-9][0-9]* slots" <<<"$out"
assert_ok "slotd --check: in region North America" \
        grep -qF "  region North America: minAvailable 2, maxServers 3 (this machine's)" <<<"$out"

etcd_cluster_start 1
for k in 1 2; do
        fleet_write_config "$k"
        sed -i '/^\[fleet\]$/a start_on_provision = no' "$(fleet_dir "$k")/etc/fleets.d/$FLEET_NAME.ini"
        fleet_host_start "$k"
done
fleet_wait_registered 1 2

running_count() { fleet_slots "$1" | awk '$4 == "running"' | wc -l; }
wrote() { grep -c "Scaler: wrote .* ($1)" "$T/allocator-1.log" || true; }
no_commands() { ! fleet_etcdctl get --prefix "$FLEET_PREFIX/hosts/" --keys-only | grep -q /scale/; }
# settled NA EU: so many servers running on host 1 (North America) and 2 (Europe), no command
# left.
settled() { [ "$(running_count 1)" = "$1" ] && [ "$(running_count 2)" = "$2" ] && no_commands; }
scaler_view() {
        local out
        out=$(fleet_get 1 "/v1/fleets/$FLEET_NAME/capacity")
        [ "${out%% *}" = 200 ] || { echo "status ${out%% *}"; return; }
        cut -d' ' -f2- <<<"$out" | jq -c --arg r "$1" '.regions[$r].scaler'
}
scaler_view_is() { [ "$(scaler_view "$1")" = "$2" ]; }
# planned REGION TEXT: the leader made a plan of the region with these counts (its debug line).
planned() { grep -qF "Scaler: fleet $FLEET_NAME region $1: $2" "$T/allocator-1.log"; }

assert_eq "$(running_count 1)$(running_count 2)" 00 "no server running before the scaler"
fleet_allocator_start 1
wait_until $((10 * TIME_SCALE)) "allocator 1 leads the scaler" grep -q "Scaler: leading" "$T/allocator-1.log"
assert_ok "the start-up log shows the .gsh target" grep -qF \
        "Scaler target \"my-fleet/North America\" buffer=2 floor=0 ceiling=3 ($T/gsh/game.gsh:16:7" \
        "$T/allocator-1.log"
wait_until "$SCALE_WITHIN" "2 running in North America, 1 in Europe (minAvailable)" settled 2 1
echo "# start commands written: $(wrote start)"
wait_until $((10 * TIME_SCALE)) "the capacity view's North America" scaler_view_is "North America" \
        '{"buffer":2,"floor":0,"ceiling":3,"busy":0,"free":2,"wanted":2}'
wait_until $((10 * TIME_SCALE)) "the capacity view's Europe" scaler_view_is Europe \
        '{"buffer":1,"floor":0,"ceiling":1,"busy":0,"free":1,"wanted":1}'

COLL=$(fleet_allocations)
# allocate REGION: an allocation in the region, fulfilled; its ID in $U.
allocate() {
        local out
        U=$(cat /proc/sys/kernel/random/uuid)
        out=$(fleet_post 1 "$COLL" "{\"allocationId\":\"$U\",\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION,\"regionId\":\"$1\"}")
        assert_eq "${out%% *}" 200 "POST of an allocation in $1 ($out)"
        wait_until $((10 * TIME_SCALE)) "allocation $U fulfilled" fulfilled "$U"
}
fulfilled() { [ "$(fleet_get 1 "$COLL/$1" | cut -d' ' -f2- | json status)" = fulfilled ]; }

allocate "North America"
U1=$U
# Settled as slotd and as the leader's view see it (the slot documents in etcd): from here on,
# no plan sees a server that is not there yet.
wait_until "$SCALE_WITHIN" "a third server in North America (1 busy + 2 free)" settled 3 1
wait_until $((10 * TIME_SCALE)) "the capacity view's North America with 1 busy" \
        scaler_view_is "North America" '{"buffer":2,"floor":0,"ceiling":3,"busy":1,"free":2,"wanted":3}'
wait_until $((10 * TIME_SCALE)) "both, and no command" settled 3 1
starts=$(wrote start)
allocate "North America"
U2=$U
# Busy 2 + buffer 2 would be 4: maxServers 3 holds it, with a stopped slot left.
wait_until $((10 * TIME_SCALE)) "a plan of North America with 2 busy" planned "North America" \
        "2 busy, 1 free, 1 stopped, 3 running wanted, 0 commands pending: 0 more"
wait_until $((10 * TIME_SCALE)) "the capacity view's North America at its ceiling" \
        scaler_view_is "North America" '{"buffer":2,"floor":0,"ceiling":3,"busy":2,"free":1,"wanted":3}'
assert_ok "3 running in North America, 1 in Europe, no command" settled 3 1
allocate Europe
wait_until $((10 * TIME_SCALE)) "a plan of Europe with 1 busy" planned Europe \
        "1 busy, 0 free, 3 stopped, 1 running wanted, 0 commands pending: 0 more"
wait_until $((10 * TIME_SCALE)) "the capacity view's Europe at its ceiling" scaler_view_is Europe \
        '{"buffer":1,"floor":0,"ceiling":1,"busy":1,"free":0,"wanted":1}'
assert_ok "still 3 and 1 running, no command" settled 3 1
assert_eq "$(wrote start)" "$starts" "no start past maxServers"

for u in "$U1" "$U2"; do
        out=$(fleet_delete 1 "$COLL/$u")
        assert_eq "${out%% *}" 204 "DELETE of allocation $u ($out)"
done
wait_until "$SCALE_WITHIN" "the surplus server in North America stopped, back to 2" settled 2 1
assert_ok "the leader wrote a stop command" test "$(wrote stop)" -ge 1

finish
