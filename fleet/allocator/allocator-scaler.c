/* SPDX-License-Identifier: MIT */
/* The scaler (allocator-scaler.h): its election, then, while leading, the plan
 * (scaler-plan.h) made from the fleet view and acted on through commands to the hosts. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "allocator-cache.h"
#include "allocator-scaler.h"
#include "allocator.h"
#include "list.h"
#include "log.h"
#include "macro.h"

/* A campaign waits in etcd this long at most, then is made again (etcd deletes the key of
 * one given up, which the next makes anew). */
#define CAMPAIGN_TIMEOUT (60 * USEC_PER_SEC)
#define RETRY_MIN (100 * USEC_PER_MSEC)
#define RETRY_MAX (5 * USEC_PER_SEC)
/* Commands of one plan, at most: what the targets need, up to this. Each command is one
 * nested transaction of the scaler's group commit (etcd.h: 127 to a request beside the
 * leader's failure branch, so 4,096 are about 33 requests, ~1.3 MB of protobuf in all, sent
 * one after the other); the bound keeps a plan's burst (the memory it queues, the time etcd
 * spends on it before a claim's batch) finite when a target is raised by thousands at once.
 * A drain of up to this many is refilled by one plan, not one interval after another. */
#define PLAN_COMMANDS_MAX 4096
/* The scaler's batches in flight: one, so that its commands take one raft entry at a time
 * beside the claims' (the allocator's own batch). */
#define SCALER_BATCHES_IN_FLIGHT 1

typedef struct ScaleCommand ScaleCommand;

struct Scaler {
        Allocator *a;
        char *name;  /* <prefix>/scaler */
        char *value; /* who campaigns: "<host>:<pid>" */
        int64_t lease;
        usec_t lease_ok; /* the last keepalive answered (or the grant), CLOCK_MONOTONIC */
        EtcdRequest *grant, *keepalive_req, *campaign;
        sd_event_source *keepalive, *retry;
        usec_t backoff;
        EtcdLeaderKey leader; /* while leading */
        bool leading;
        bool resigning; /* its lease's revocation asked, on a stop */
        /* acting on the plan, while leading */
        sd_event_source *plan_timer;
        usec_t last_plan;     /* CLOCK_MONOTONIC */
        bool dirty;           /* the view changed since the last plan */
        unsigned in_flight;   /* commands' transactions unanswered */
        ScaleCommand *commands;
        EtcdBatch *batch;     /* the commands' group commit */
        ScalerPick *picks;    /* PLAN_COMMANDS_MAX, for the plan */
        bool writes_failing;  /* frozen: one command a plan, after a back-off, until one works */
        usec_t write_backoff;
};

static void scaler_poke(Scaler *s);

/* A command's transaction in flight (cancelled when the scaler goes). */
struct ScaleCommand {
        Scaler *s;
        EtcdBatchTxn *req;
        char *key;
        ScalerAction action;
        LIST_FIELDS(ScaleCommand, commands);
};

static void scaler_grant(Scaler *s);

static void leader_clear(Scaler *s) {
        s->leader.name = mfree(s->leader.name);
        s->leader.key = mfree(s->leader.key);
        s->leader = (EtcdLeaderKey) {};
}

/* The lease given up (lost, or its keepalives unanswered for the TTL): not leading, and a
 * new lease campaigns after a back-off. */
static void scaler_lost(Scaler *s, const char *why) {
        if (s->leading)
                log_warning("Scaler: no longer leading (%s)", why);
        s->leading = false;
        s->plan_timer = sd_event_source_disable_unref(s->plan_timer);
        leader_clear(s);
        etcd_request_cancel(s->campaign);
        etcd_request_cancel(s->keepalive_req);
        s->campaign = s->keepalive_req = NULL;
        s->keepalive = sd_event_source_disable_unref(s->keepalive);
        s->lease = 0;
        s->backoff = s->backoff ? MIN(s->backoff * 2, RETRY_MAX) : RETRY_MIN;
}

static int on_retry(sd_event_source *es, uint64_t usec, void *userdata) {
        Scaler *s = userdata;

        s->retry = sd_event_source_disable_unref(s->retry);
        scaler_grant(s);
        return 0;
}

static void scaler_retry(Scaler *s, const char *why) {
        scaler_lost(s, why);
        s->retry = sd_event_source_disable_unref(s->retry);
        if (sd_event_add_time_relative(s->a->event, &s->retry, CLOCK_MONOTONIC, s->backoff, 0,
                                       on_retry, s) < 0)
                log_error("Scaler: cannot arm a timer: the election is given up");
}

static void on_campaign(Etcd *e, const EtcdResponse *r, void *userdata);

static void scaler_campaign(Scaler *s) {
        int r = etcd_election_campaign(s->a->etcd, s->name, s->lease, s->value,
                                       CAMPAIGN_TIMEOUT, on_campaign, s, &s->campaign);
        if (r < 0)
                scaler_retry(s, "campaign refused");
}

static void on_campaign(Etcd *e, const EtcdResponse *r, void *userdata) {
        Scaler *s = userdata;

        s->campaign = NULL;
        if (r->error == -ETIMEDOUT) {
                scaler_campaign(s); /* still waiting behind the leader */
                return;
        }
        if (r->error < 0) {
                log_warning("Scaler: campaign failed: %s", r->message);
                scaler_retry(s, "campaign failed");
                return;
        }
        leader_clear(s);
        s->leader = (EtcdLeaderKey) { .name = strdup(r->leader.name),
                                      .key = strdup(r->leader.key), .rev = r->leader.rev,
                                      .lease = r->leader.lease };
        if (!s->leader.name || !s->leader.key) {
                scaler_retry(s, "no memory");
                return;
        }
        s->leading = true;
        s->backoff = 0;
        log_info("Scaler: leading (election %s, key %s, revision %" PRIi64 ")", s->name,
                 s->leader.key, s->leader.rev);
        s->dirty = true;
        scaler_poke(s);
}

static void on_keepalive_answer(Etcd *e, const EtcdResponse *r, void *userdata) {
        Scaler *s = userdata;

        s->keepalive_req = NULL;
        if (r->error == 0 && r->ttl <= 0) {
                scaler_retry(s, "lease expired");
                return;
        }
        if (r->error == 0)
                s->lease_ok = now_usec(CLOCK_MONOTONIC);
        else if (now_usec(CLOCK_MONOTONIC) - s->lease_ok >= SCALER_LEASE_TTL * USEC_PER_SEC)
                scaler_retry(s, "keepalives unanswered for the lease's TTL");
}

static int on_keepalive(sd_event_source *es, uint64_t usec, void *userdata) {
        Scaler *s = userdata;

        /* leading only while the lease is known alive: etcd may end it any time after */
        if (s->leading &&
            now_usec(CLOCK_MONOTONIC) - s->lease_ok >= SCALER_LEASE_TTL * USEC_PER_SEC) {
                scaler_retry(s, "keepalives unanswered for the lease's TTL");
                return 0;
        }
        if (!s->keepalive_req &&
            etcd_lease_keepalive(s->a->etcd, s->lease, on_keepalive_answer, s,
                                 &s->keepalive_req) < 0)
                log_warning("Scaler: keepalive refused");
        return sd_event_source_set_time_relative(es, SCALER_LEASE_TTL * USEC_PER_SEC / 3);
}

static void on_grant(Etcd *e, const EtcdResponse *r, void *userdata) {
        Scaler *s = userdata;

        s->grant = NULL;
        if (r->error < 0 || r->lease_id <= 0) {
                scaler_retry(s, r->error < 0 ? r->message : "no lease");
                return;
        }
        s->lease = r->lease_id;
        s->lease_ok = now_usec(CLOCK_MONOTONIC);
        if (sd_event_add_time_relative(s->a->event, &s->keepalive, CLOCK_MONOTONIC,
                                       SCALER_LEASE_TTL * USEC_PER_SEC / 3, 0, on_keepalive, s) < 0 ||
            sd_event_source_set_enabled(s->keepalive, SD_EVENT_ON) < 0) {
                scaler_retry(s, "no timer");
                return;
        }
        scaler_campaign(s);
}

static void scaler_grant(Scaler *s) {
        if (etcd_lease_grant(s->a->etcd, SCALER_LEASE_TTL, on_grant, s, &s->grant) < 0)
                scaler_retry(s, "grant refused");
}

int scaler_start(Allocator *a) {
        char host[256] = "";
        Scaler *s = new0(Scaler, 1);

        if (!s)
                return log_oom();
        s->a = a;
        (void) gethostname(host, sizeof(host) - 1);
        if (asprintf(&s->name, "%s/scaler", a->config->prefix) < 0 ||
            asprintf(&s->value, "%s:%d", host, (int) getpid()) < 0) {
                free(s->name);
                free(s);
                return log_oom();
        }
        if (scaler_index_new(a->config->strategy, &a->scaler_index) < 0 ||
            !(s->picks = new0(ScalerPick, PLAN_COMMANDS_MAX)) ||
            etcd_batch_new(&s->batch, a->etcd, a->event, SCALER_BATCHES_IN_FLIGHT) < 0) {
                a->scaler_index = scaler_index_free(a->scaler_index);
                free(s->picks);
                free(s->name);
                free(s->value);
                free(s);
                return log_oom();
        }
        a->scaler = s;
        scaler_grant(s);
        return 0;
}

static void resigned(Scaler *s) {
        s->resigning = false;
        s->retry = sd_event_source_disable_unref(s->retry);
        allocator_settled(s->a);
}

static void on_revoked(Etcd *e, const EtcdResponse *r, void *userdata) {
        resigned(userdata);
}

static int on_revoke_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        resigned(userdata);
        return 0;
}

bool scaler_resigning(const Allocator *a) {
        return a->scaler && a->scaler->resigning;
}

int scaler_resign(Allocator *a) {
        Scaler *s = a->scaler;

        if (!s || s->lease <= 0)
                return 0;
        s->keepalive = sd_event_source_disable_unref(s->keepalive);
        s->retry = sd_event_source_disable_unref(s->retry);
        etcd_request_cancel(s->campaign);
        s->campaign = NULL;
        s->leading = false;
        if (etcd_lease_revoke(a->etcd, s->lease, on_revoked, s, NULL) < 0 ||
            sd_event_add_time_relative(a->event, &s->retry, CLOCK_MONOTONIC, USEC_PER_SEC, 0,
                                       on_revoke_timeout, s) < 0)
                return 0;
        s->lease = 0;
        s->resigning = true;
        return 1;
}

void scaler_done(Allocator *a) {
        Scaler *s = a->scaler;

        if (!s)
                return;
        s->plan_timer = sd_event_source_disable_unref(s->plan_timer);
        while (s->commands) {
                ScaleCommand *cmd = s->commands;

                etcd_batch_txn_cancel(cmd->req);
                LIST_REMOVE(commands, s->commands, cmd);
                free(cmd->key);
                free(cmd);
        }
        s->batch = etcd_batch_free(s->batch);
        free(s->picks);
        /* the view's slots are freed after: they find no index to tell */
        a->scaler_index = scaler_index_free(a->scaler_index);
        s->keepalive = sd_event_source_disable_unref(s->keepalive);
        s->retry = sd_event_source_disable_unref(s->retry);
        etcd_request_cancel(s->grant);
        etcd_request_cancel(s->campaign);
        etcd_request_cancel(s->keepalive_req);
        leader_clear(s);
        free(s->name);
        free(s->value);
        a->scaler = mfree(s);
}

bool scaler_leading(const Allocator *a) {
        return a->scaler && a->scaler->leading;
}

/* ---- acting on the plan ---- */

static void on_command(Etcd *e, const EtcdResponse *r, void *userdata);

/* Sends a command's transaction (its compares, then op), with a read of the leader key as its
 * failure branch; *key (the command's) moves into the ScaleCommand. SCALER_NONE: a deletion. */
static int command_send(Scaler *s, char **key, ScalerAction action, const EtcdCompare *cmp,
                        size_t n_cmp, const EtcdOp *op) {
        EtcdOp fail = { .type = ETCD_OP_RANGE, .key = s->leader.key };
        ScaleCommand *cmd = new0(ScaleCommand, 1);
        int r;

        if (!cmd)
                return -ENOMEM;
        cmd->s = s;
        cmd->action = action;
        cmd->key = TAKE_PTR(*key);
        /* (the txn's arguments are copied at the call) */
        r = etcd_batch_txn(s->batch, cmp, n_cmp, op, 1, &fail, 1, on_command, cmd, &cmd->req);
        if (r < 0) {
                free(cmd->key);
                free(cmd);
                return r;
        }
        LIST_PREPEND(commands, s->commands, cmd);
        s->in_flight++;
        return 0;
}

/* The command's transaction: written only while this replica leads (its leader key's
 * create_revision), on the slot's document as the plan saw it, with no claim and no command
 * on the slot. The failure branch reads the leader key: gone, and leading is over. */
static int command_write(Scaler *s, const CacheSlot *slot, ScalerAction action) {
        Allocator *a = s->a;
        _cleanup_free_ char *key = NULL, *claim = NULL, *value = NULL;
        ScaleDoc doc = { .action = action == SCALER_STOP ? SCALE_STOP : SCALE_START,
                         .fleet_id = slot->fleet };
        int r;

        key = fleet_key_scale(a->config->prefix, slot->machine_id, slot->slot_id);
        claim = fleet_key_claim(a->config->prefix, slot->machine_id, slot->slot_id);
        if (!key || !claim)
                return -ENOMEM;
        r = scale_doc_format(&doc, &value);
        if (r < 0)
                return r;
        EtcdCompare cmp[] = {
                { .key = s->leader.key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL,
                  .number = s->leader.rev },
                { .key = slot->key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = slot->mod_revision },
                { .key = claim, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL, .number = 0 },
                { .key = key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL, .number = 0 },
        };
        EtcdOp put = { .type = ETCD_OP_PUT, .key = key, .value = value };

        r = command_send(s, &key, action, cmp, ELEMENTSOF(cmp), &put);
        if (r < 0)
                return r;
        log_debug("Scaler: %s slot %" PRIu32 " of machine %s (fleet %s, region %s)",
                  scaler_action_to_string(action), slot->slot_id, slot->machine_id,
                  slot->fleet, strempty(slot->doc.region_id));
        return 0;
}

/* A command left for a machine that is gone (its key machines/<id> went with its lease):
 * deleted while this replica leads, if the machine's key is still absent and the command
 * unchanged. Its registry, back one day, would otherwise carry out a plan long stale. */
static int command_drop(Scaler *s, const CacheScale *c, const char *machine_id) {
        _cleanup_free_ char *key = strdup(c->key),
                            *machine = fleet_key_machine(s->a->config->prefix, machine_id);
        int r;

        if (!key || !machine)
                return -ENOMEM;
        EtcdCompare cmp[] = {
                { .key = s->leader.key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL,
                  .number = s->leader.rev },
                { .key = machine, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL,
                  .number = 0 },
                { .key = key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = c->mod_revision },
        };
        EtcdOp del = { .type = ETCD_OP_DELETE, .key = key };

        r = command_send(s, &key, SCALER_NONE, cmp, ELEMENTSOF(cmp), &del);
        if (r >= 0)
                log_debug("Scaler: deleting %s: machine %s is gone", c->key, machine_id);
        return r;
}

/* The commands of machines the view no longer has, dropped: at most budget; the number sent. */
static size_t sweep_gone(Scaler *s, size_t budget) {
        size_t sent = 0;

        for (const CacheScale *c = s->a->cache.all_scales; c && sent < budget; c = c->all_next) {
                _cleanup_free_ char *machine = strndup(c->index_key,
                                                       strcspn(c->index_key, "/"));
                int r;

                if (!machine) {
                        log_oom();
                        break;
                }
                if (cache_machine(s->a, machine))
                        continue;
                r = command_drop(s, c, machine);
                if (r < 0) {
                        log_warning_errno(r, "Scaler: cannot delete a command: %m");
                        break;
                }
                sent++;
        }
        return sent;
}

static void on_command(Etcd *e, const EtcdResponse *r, void *userdata) {
        ScaleCommand *cmd = userdata;
        Scaler *s = cmd->s;
        _cleanup_free_ char *key = cmd->key;
        ScalerAction action = cmd->action;

        LIST_REMOVE(commands, s->commands, cmd);
        free(cmd);
        s->in_flight--;
        if (r->error >= 0 && r->succeeded && action == SCALER_NONE)
                log_info("Scaler: deleted %s: its machine is gone", key);
        else if (r->error >= 0 && r->succeeded)
                log_info("Scaler: wrote %s (%s)", key, scaler_action_to_string(action));
        else if (r->error >= 0 && action == SCALER_NONE)
                log_debug("Scaler: %s not deleted: its machine is back, or it changed", key);
        else if (r->error >= 0)
                log_debug("Scaler: %s not written: the view it was planned on moved on", key);
        if (r->error < 0) {
                if (!s->writes_failing)
                        log_warning("Scaler: a command could not be written (%s): writing "
                                    "nothing more until etcd takes one", r->message);
                s->writes_failing = true;
                s->write_backoff = s->write_backoff ? MIN(s->write_backoff * 2, RETRY_MAX)
                                                    : RETRY_MIN;
        } else if (r->succeeded) {
                if (s->writes_failing)
                        log_info("Scaler: etcd takes commands again");
                s->writes_failing = false;
                s->write_backoff = 0;
        } else if (s->leading && (r->n_responses < 1 || r->responses[0].n_kvs != 1 ||
                                  r->responses[0].kvs[0].create_revision != s->leader.rev)) {
                scaler_retry(s, "the leader key is gone");
                return;
        }
        /* a compare that failed otherwise: the view moved on, and the next plan sees it */
        s->dirty = true;
        scaler_poke(s);
}

/* Plans one fleet's region from the index and writes its commands; the number written. */
static size_t plan_group(Scaler *s, const ScalerGroup *g, size_t budget) {
        const AllocatorConfig *c = s->a->config;
        const ScalerTarget *t = scaler_target_find(c->scaler_targets.targets,
                                                   c->scaler_targets.n, scaler_group_fleet(g),
                                                   scaler_group_region(g));
        size_t written = 0;
        ScalerCount count;
        int m;

        if (!t || budget == 0)
                return 0;
        m = scaler_group_plan(s->a->scaler_index, g, t, s->picks,
                              MIN(budget, (size_t) PLAN_COMMANDS_MAX), &count);
        if (m < 0) {
                log_oom();
                return 0;
        }
        log_debug("Scaler: fleet %s region %s: %" PRIu32 " busy, %" PRIu32 " free, %" PRIu32
                  " stopped, %" PRIu32 " running wanted, %" PRIu32 " commands pending: %d more",
                  scaler_group_fleet(g), scaler_group_region(g), count.busy, count.free,
                  count.stopped, count.wanted, scaler_group_commanded(g), m);
        for (int i = 0; i < m; i++) {
                const CacheSlot *slot = cache_slot_by_index(s->a, s->picks[i].machine_id,
                                                            s->picks[i].slot_id);
                int r = slot ? command_write(s, slot, s->picks[i].action) : -ENOENT;

                if (r < 0) {
                        log_warning_errno(r, "Scaler: cannot send a command: %m");
                        break;
                }
                written++;
        }
        return written;
}

/* A plan: O(regions + commands written) (scaler-index.h), at most PLAN_COMMANDS_MAX
 * commands, one while writes fail. */
static void scaler_plan_now(Scaler *s) {
        size_t budget = s->writes_failing ? 1 : PLAN_COMMANDS_MAX;

        budget -= sweep_gone(s, budget);
        for (ScalerGroup *g = scaler_index_first(s->a->scaler_index); g && budget > 0;
             g = scaler_index_next(g))
                budget -= plan_group(s, g, budget);
}

static int on_plan_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Scaler *s = userdata;

        s->plan_timer = sd_event_source_disable_unref(s->plan_timer);
        /* one plan at a time: the commands of the last are answered first */
        if (!s->leading || s->in_flight > 0 || !s->dirty || !cache_ready(s->a))
                return 0;
        s->dirty = false;
        s->last_plan = now_usec(CLOCK_MONOTONIC);
        scaler_plan_now(s);
        return 0;
}

/* A plan is due: at once if the last was at least an interval ago (a back-off while etcd
 * writes fail), else when it will be. */
static void scaler_poke(Scaler *s) {
        usec_t wait = s->writes_failing ? MAX(s->write_backoff, s->a->config->scaler_interval)
                                        : s->a->config->scaler_interval;
        usec_t due = s->last_plan + wait;

        if (!s->leading || s->plan_timer || s->in_flight > 0 || !s->dirty)
                return;
        if (sd_event_add_time(s->a->event, &s->plan_timer, CLOCK_MONOTONIC,
                              MAX(due, now_usec(CLOCK_MONOTONIC)), 0, on_plan_timer, s) < 0)
                log_error("Scaler: cannot arm the plan's timer");
}

void scaler_view_changed(Allocator *a) {
        Scaler *s = a->scaler;

        if (!s || !s->leading)
                return;
        s->dirty = true;
        scaler_poke(s);
}
