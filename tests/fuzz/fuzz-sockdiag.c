/* SPDX-License-Identifier: MIT */
/* NETLINK_SOCK_DIAG answer parser. The input is one received datagram, read as the answer to
 * the request with sequence number 1. */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <string.h>

#include "fuzz.h"
#include "sockdiag.h"

#define FUZZ_SEQ 1

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        SockDiagPeer p, untouched, again;
        int r;

        memset(&p, 0x5a, sizeof(p));
        memcpy(&untouched, &p, sizeof(p));
        memcpy(&again, &p, sizeof(p));
        r = sockdiag_parse_reply(data, size, FUZZ_SEQ, &p);

        /* Only errno values: ours, or the one an NLMSG_ERROR carries (1..4095). */
        FUZZ_ASSERT(r <= 0 && r >= -4095);
        if (r < 0) {
                FUZZ_ASSERT(memcmp(&p, &untouched, sizeof(p)) == 0);
                FUZZ_ASSERT(sockdiag_parse_reply(data, size, FUZZ_SEQ, &again) == r);
                return 0;
        }

        /* An accepted answer holds a header, an inet_diag_msg and an 8-byte attribute. */
        FUZZ_ASSERT(size >= NLMSG_HDRLEN + sizeof(struct inet_diag_msg) + NLA_HDRLEN + 8);
        FUZZ_ASSERT(sockdiag_parse_reply(data, size, FUZZ_SEQ, &again) == 0);
        FUZZ_ASSERT(again.cgroup_id == p.cgroup_id && again.uid == p.uid &&
                    again.inode == p.inode);
        return 0;
}
