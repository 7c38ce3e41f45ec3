/* SPDX-License-Identifier: MIT */
/* The whole (allocator.h): what every module of slotd-allocator asks of it. */
#include "allocator.h"
#include "log.h"

char *allocator_record_key(const Allocator *a, const char *fleet, const char *allocation_id) {
        return fleet_key_allocation(a->config->prefix, fleet, allocation_id);
}

bool allocator_etcd_failed(Allocator *a, const EtcdResponse *resp) {
        if (resp->error >= 0)
                return false;
        a->metrics.etcd_errors++;
        log_debug("etcd: %s", resp->message);
        return true;
}

void allocator_settled(Allocator *a) {
        if (a->on_settled)
                a->on_settled(a);
}
