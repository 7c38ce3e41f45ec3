# SPDX-License-Identifier: MIT
"""Simulated fleet hosts for the allocator's tests (issue 15, SPEC §13): what a registry
writes (machine and slot documents), and what it does with a claim (confirm it, refuse it),
through etcd's v3 JSON gateway, each in one transaction as the registry makes it.

    fleet_sim.py ENDPOINT PREFIX machine ID [draining] [deprovisionable] [holdUntil=T]
    fleet_sim.py ENDPOINT PREFIX slot FLEET ID SLOT STATE PROCESS READY BUILD REGION [ALLOC]
                                                      [FIELD=VALUE...] (strings)
    fleet_sim.py ENDPOINT PREFIX confirm ID SLOT     the claim on the slot fulfilled
    fleet_sim.py ENDPOINT PREFIX refuse ID SLOT      the claim deleted, ID excluded
    fleet_sim.py ENDPOINT PREFIX confirmer SECONDS    confirms every claim it sees, until killed
                                                      or SECONDS pass; prints how many
    fleet_sim.py ENDPOINT PREFIX -                    the commands above, one a line on stdin

Times are RFC 3339 with milliseconds. Exits 1 with a message when etcd says no."""
import base64
import datetime
import hashlib
import json
import shlex
import sys
import time
import urllib.request


def b64(s):
    return base64.b64encode(s.encode()).decode()


def unb64(s):
    return base64.b64decode(s).decode()


class Etcd:
    def __init__(self, endpoint):
        self.endpoint = endpoint.split(",")[0]

    def call(self, path, body, timeout=5):
        req = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)

    def get(self, key):
        r = self.call("/v3/kv/range", {"key": b64(key)})
        kvs = r.get("kvs", [])
        if not kvs:
            return None, 0
        return json.loads(unb64(kvs[0]["value"])), int(kvs[0]["mod_revision"])

    def put(self, key, value):
        self.call("/v3/kv/put", {"key": b64(key), "value": b64(json.dumps(value))})

    def txn(self, compare, success):
        return self.call("/v3/kv/txn", {"compare": compare, "success": success}).get(
            "succeeded", False)


def machine_number(machine):
    """The number a slotd with machine.id = machine and no machine.number has (SPEC §2)."""
    if machine.isdigit() and machine[0] != "0" and int(machine) < 2 ** 63:
        return int(machine)
    n = int.from_bytes(hashlib.sha256(machine.encode()).digest()[:8], "big") & (2 ** 63 - 1)
    return n or 1


def now_rfc3339():
    t = datetime.datetime.now(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def mod_equal(key, rev):
    return {"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(rev)}


def put_op(key, value):
    return {"requestPut": {"key": b64(key), "value": b64(json.dumps(value))}}


def del_op(key):
    return {"requestDeleteRange": {"key": b64(key)}}


def slot_doc(fleet, machine, slot, state, process, ready, build, region, alloc=""):
    return {"machineID": machine, "machineNumber": machine_number(machine), "slotID": int(slot),
            "fleetId": fleet, "regionId": region,
            "state": state, "processState": process, "ready": ready == "true",
            "readyForPlayers": False, "readyForPlayersAt": "", "buildConfigurationId": build,
            # [] as the registry writes it for a fleet without [build_configuration]
            # sections: it runs any ID
            "buildConfigurations": [], "ipv4": "192.0.2.1",
            "ipv6": "", "gamePort": 7000 + int(slot), "queryPort": 7100 + int(slot),
            "allocationId": alloc, "draining": False, "holdUntil": "", "reservedUntil": ""}


def claim_and_record(etcd, prefix, machine, slot):
    ckey = "%s/hosts/%s/claims/%s" % (prefix, machine, slot)
    claim, crev = etcd.get(ckey)
    if claim is None:
        sys.exit("no claim at " + ckey)
    rkey = "%s/allocations/%s/%s" % (prefix, claim["fleetId"], claim["allocationId"])
    rec, rrev = etcd.get(rkey)
    if rec is None:
        sys.exit("no record at " + rkey)
    return ckey, crev, claim, rkey, rrev, rec


def confirm(etcd, prefix, machine, slot):
    ckey, crev, claim, rkey, rrev, rec = claim_and_record(etcd, prefix, machine, slot)
    skey = "%s/slots/%s/%s/%s" % (prefix, claim["fleetId"], machine, slot)
    sdoc, _ = etcd.get(skey)
    rec.update(status="fulfilled", fulfilled=now_rfc3339(), machineNumber=machine_number(machine))
    sdoc.update(state="allocated", allocationId=claim["allocationId"])
    return etcd.txn([mod_equal(ckey, crev), mod_equal(rkey, rrev)],
                    [put_op(rkey, rec), put_op(skey, sdoc), del_op(ckey)])


def refuse(etcd, prefix, machine, slot):
    ckey, crev, claim, rkey, rrev, rec = claim_and_record(etcd, prefix, machine, slot)
    rec["excluded"] = sorted(set(rec.get("excluded", []) + [machine]))
    rec["error"] = "slotd on %s refused it (simulated)" % machine  # slotd's reason, as the registry keeps it
    return etcd.txn([mod_equal(ckey, crev), mod_equal(rkey, rrev)],
                    [put_op(rkey, rec), del_op(ckey)])


def confirmer(etcd, prefix, seconds):
    """Confirms claims as a registry would, by polling (a range per round)."""
    start = prefix + "/hosts/"
    end = prefix + "/hosts0"
    done = 0
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        r = etcd.call("/v3/kv/range", {"key": b64(start), "range_end": b64(end)})
        for kv in r.get("kvs", []):
            parts = unb64(kv["key"]).split("/")
            if parts[-2] != "claims":
                continue
            try:
                if confirm(etcd, prefix, parts[-3], parts[-1]):
                    done += 1
            except SystemExit:
                pass
        time.sleep(0.01)
    print(done)


def main():
    etcd, prefix = Etcd(sys.argv[1]), sys.argv[2]
    if sys.argv[3] == "-":
        for line in sys.stdin:
            words = shlex.split(line)
            if words:
                run(etcd, prefix, words[0], words[1:])
    else:
        run(etcd, prefix, sys.argv[3], sys.argv[4:])


def run(etcd, prefix, cmd, args):
    if cmd == "machine":
        doc = {"machineID": args[0], "machineNumber": machine_number(args[0]),
               "ipv4": "192.0.2.1", "ipv6": "", "fleets": ["game"],
               "regions": [], "draining": "draining" in args[1:], "idleSince": "",
               "holdUntil": "", "deprovisionable": "deprovisionable" in args[1:],
               "idleTtlSec": 1800, "slots": 0, "faults": [], "slotd": "test",
               "registeredAt": now_rfc3339()}
        for a in args[1:]:
            if a.startswith("holdUntil="):
                doc["holdUntil"] = a.split("=", 1)[1]
        etcd.put("%s/machines/%s" % (prefix, args[0]), doc)
    elif cmd == "slot":
        fleet, machine, slot = args[0], args[1], args[2]
        doc = slot_doc(fleet, machine, slot, *[a for a in args[3:] if "=" not in a])
        for a in args[3:]:
            if "=" in a:
                k, v = a.split("=", 1)
                doc[k] = v
        etcd.put("%s/slots/%s/%s/%s" % (prefix, fleet, machine, slot), doc)
    elif cmd == "confirm":
        sys.exit(0 if confirm(etcd, prefix, args[0], args[1]) else "the claim changed")
    elif cmd == "players-ready":
        # the game server said it is ready for players: the registry's document then
        skey = "%s/slots/%s/%s/%s" % (prefix, args[0], args[1], args[2])
        sdoc, _ = etcd.get(skey)
        sdoc.update(readyForPlayers=True, readyForPlayersAt=now_rfc3339())
        etcd.put(skey, sdoc)
    elif cmd == "refuse":
        sys.exit(0 if refuse(etcd, prefix, args[0], args[1]) else "the claim changed")
    elif cmd == "confirmer":
        confirmer(etcd, prefix, args[0])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
