#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A strict check of the Allocations API's answers against Unity's client classes.

Written from Unity's documentation of com.unity.services.apis, namespace
Unity.Services.Apis.Multiplay (docs.unity3d.com/Packages/com.unity.services.apis@0.1 and @1.x,
api/Unity.Services.Apis.Multiplay.*), whose models Newtonsoft.Json reads:

  MultiplayAllocationsAllocation(string allocationId (required), long buildConfigurationId,
      DateTime created, string fleetId, DateTime fulfilled, int gamePort, string ipv4,
      string ipv6, long machineId, bool readiness, DateTime ready, string regionId,
      string requestId, DateTime requested, long serverId)
  MultiplayAllocationsAllocateResponse(string allocationId (required), string href (required))
  MultiplayAllocationsListAllocationsResponse(List<MultiplayAllocationsAllocation> allocations
      (required), MultiplayAllocationsPagination pagination (required))
  MultiplayAllocationsPagination(int limit, int offset)

Stricter than Newtonsoft where it would coerce: a number must be a JSON integer in the C#
type's range (not a numeric string), a bool a JSON bool, a DateTime an RFC 3339 string (a
DateTime is not nullable: "" and null fail the client, so they fail here), a string a JSON
string. Fields the classes lack (slotd's "status") are ignored, as Newtonsoft ignores them.

Usage: unity_schema.py KIND < body, KIND one of Allocation, AllocateResponse,
ListAllocationsResponse. Exit 0 when the body is of the class; else 1 and the errors on stdout.
unity_schema.py --dir DIR checks every answer a test kept in DIR (fleet-lib.sh: one file per
answer, named KIND.*, its first line "METHOD PATH", the rest the body), in one process: the
tests' VM starts a Python in seconds, not milliseconds. It prints each error with its request
and the number of answers checked of each kind on the last line, "checked: KIND N …".
"""
import json
import os
import re
import sys

INT32 = (-2 ** 31, 2 ** 31 - 1)
INT64 = (-2 ** 63, 2 ** 63 - 1)
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")

# name -> (C# type, required)
CLASSES = {
    "Allocation": {
        "allocationId": ("string", True),
        "buildConfigurationId": ("long", False),
        "created": ("DateTime", False),
        "fleetId": ("string", False),
        "fulfilled": ("DateTime", False),
        "gamePort": ("int", False),
        "ipv4": ("string", False),
        "ipv6": ("string", False),
        "machineId": ("long", False),
        "readiness": ("bool", False),
        "ready": ("DateTime", False),
        "regionId": ("string", False),
        "requestId": ("string", False),
        "requested": ("DateTime", False),
        "serverId": ("long", False),
    },
    "AllocateResponse": {
        "allocationId": ("string", True),
        "href": ("string", True),
    },
    "ListAllocationsResponse": {
        "allocations": ("List<Allocation>", True),
        "pagination": ("Pagination", True),
    },
    "Pagination": {
        "limit": ("int", False),
        "offset": ("int", False),
    },
}


def check_value(path, ctype, v, errors):
    if ctype in ("int", "long"):
        lo, hi = INT32 if ctype == "int" else INT64
        if type(v) is not int or not lo <= v <= hi:
            errors.append("%s: %r is no C# %s" % (path, v, ctype))
    elif ctype == "bool":
        if type(v) is not bool:
            errors.append("%s: %r is no C# bool" % (path, v))
    elif ctype == "string":
        if v is not None and type(v) is not str:
            errors.append("%s: %r is no C# string" % (path, v))
    elif ctype == "DateTime":
        if type(v) is not str or not RFC3339.match(v):
            errors.append("%s: %r is no RFC 3339 time (a C# DateTime, not nullable)" % (path, v))
    elif ctype.startswith("List<"):
        if type(v) is not list:
            errors.append("%s: %r is no list" % (path, v))
            return
        for i, e in enumerate(v):
            check_class("%s[%d]" % (path, i), ctype[5:-1], e, errors)
    else:
        check_class(path, ctype, v, errors)


def check_class(path, name, obj, errors):
    if type(obj) is not dict:
        errors.append("%s: %r is no %s object" % (path, obj, name))
        return
    for field, (ctype, required) in CLASSES[name].items():
        if field not in obj:
            if required:
                errors.append("%s.%s: required by %s, missing" % (path, field, name))
            continue
        if obj[field] is None and required and ctype in ("string",):
            continue  # Newtonsoft's Required.AllowNull
        check_value("%s.%s" % (path, field), ctype, obj[field], errors)


def check(name, text):
    errors = []
    try:
        obj = json.loads(text)
    except ValueError as e:
        return ["not JSON: %s" % e]
    check_class(name, name, obj, errors)
    return errors


def selftest():
    """The checker refuses what Unity's client would (so a pass means something)."""
    good = {"allocationId": "a", "buildConfigurationId": 1, "machineId": 2, "serverId": 0,
            "gamePort": 7000, "readiness": True, "requested": "2026-01-02T03:04:05.678Z",
            "requestId": "r", "status": "claimed"}
    assert check("Allocation", json.dumps(good)) == []
    for bad in ({"buildConfigurationId": "42"}, {"machineId": "3d12"}, {"fulfilled": ""},
                {"ready": True}, {"ready": None}, {"readiness": "true"}, {"gamePort": 2 ** 31},
                {"requested": "2026-01-02 03:04:05"}):
        assert check("Allocation", json.dumps(dict(good, **bad))) != [], bad
    assert check("Allocation", json.dumps({"fleetId": "f"})) != []
    assert check("ListAllocationsResponse", json.dumps({"allocations": []})) != []
    assert check("ListAllocationsResponse",
                 json.dumps({"allocations": [good], "pagination": {"limit": 1}})) == []
    assert check("ListAllocationsResponse",
                 json.dumps({"allocations": [dict(good, ready="")], "pagination": {}})) != []
    assert check("AllocateResponse", json.dumps({"allocationId": "a"})) != []


def check_dir(d):
    """Every kept answer of DIR; returns the number of answers that failed."""
    failed, counts = 0, {}
    for name in sorted(os.listdir(d)):
        kind = name.split(".", 1)[0]
        if kind not in CLASSES:
            print("%s: no class %r" % (name, kind))
            failed += 1
            continue
        with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
            request, _, body = f.read().partition("\n")
        counts[kind] = counts.get(kind, 0) + 1
        errors = check(kind, body)
        for e in errors:
            print(e)
        if errors:
            print("  (%s: %s)" % (request, body.replace("\n", "")))
            failed += 1
    print("checked: " + " ".join("%s %d" % kv for kv in sorted(counts.items())))
    return failed


def main():
    if sys.argv[1:] == ["--selftest"]:
        selftest()
        return 0
    if sys.argv[1:2] == ["--dir"] and len(sys.argv) == 3:
        return 1 if check_dir(sys.argv[2]) else 0
    errors = check(sys.argv[1], sys.stdin.read())
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
