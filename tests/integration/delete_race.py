#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A DELETE on a replica whose fleet view has not yet seen the claim (test-allocator-delete.sh,
SPEC §13 step 4).

    delete_race.py ETCD PREFIX TOKEN URL-A URL-B COLLECTION ROUNDS

Each round: POST a new allocationId to replica A and, the moment its 200 is read, DELETE it on
replica B (its own kept-alive connection: no connect between them, so B's watch has had well
under a millisecond to bring the claim). The DELETE must be 204; then, at once (the deletion is
one transaction), etcd must hold no claim under PREFIX/hosts/, no record of the allocationId
and no index of it. The hosts never confirm: a claim is only ever removed by a DELETE (or its
deadline, far away). Prints a JSON summary; exits 1 on the first round that fails, with its
evidence."""
import http.client
import json
import sys
import urllib.parse
import uuid

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fleet_sim import Etcd, b64  # noqa: E402


def conn(url):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=10)


def request(c, token, method, path, body=None):
    headers = {"Authorization": "Bearer " + token}
    if body is not None:
        headers["Content-Type"] = "application/json"
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    return r.status, r.read().decode()


def count(etcd, key, prefix=False):
    q = {"key": b64(key), "count_only": True}
    if prefix:
        end = key[:-1] + chr(ord(key[-1]) + 1)
        q["range_end"] = b64(end)
    return int(etcd.call("/v3/kv/range", q).get("count", 0))


def main():
    endpoint, prefix, token, url_a, url_b, coll, rounds = sys.argv[1:8]
    etcd = Etcd(endpoint)
    a, b = conn(url_a), conn(url_b)
    fleet = coll.rstrip("/").split("/")[-2]
    for i in range(int(rounds)):
        u = str(uuid.uuid4())
        st, body = request(a, token, "POST", coll, json.dumps({"allocationId": u}))
        if st != 200:
            sys.exit("round %d: POST %s on A answered %d %s" % (i, u, st, body))
        st, body = request(b, token, "DELETE", coll + "/" + u)
        if st != 204:
            sys.exit("round %d: DELETE %s on B answered %d %s" % (i, u, st, body))
        left = {"claims": count(etcd, prefix + "/hosts/", True),
                "record": count(etcd, "%s/allocations/%s/%s" % (prefix, fleet, u)),
                "index": count(etcd, "%s/allocation-ids/%s" % (prefix, u))}
        if any(left.values()):
            sys.exit("round %d: after the 204 of DELETE %s on B, etcd still holds %s" %
                     (i, u, json.dumps(left)))
    print(json.dumps({"rounds": int(rounds)}))


if __name__ == "__main__":
    main()
