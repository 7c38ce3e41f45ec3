/* SPDX-License-Identifier: MIT */
/* The fleet view's rule of order (view-rule.h). */
#include "view-rule.h"

void view_range_asked(ViewClock *c) {
        c->generation++;
        if (c->generation == 0) /* 0 is the answers' */
                c->generation++;
}

void view_range_read(ViewClock *c, int64_t revision) {
        c->range_revision = revision;
        c->revision = revision;
}

void view_watch_advanced(ViewClock *c, int64_t revision) {
        if (revision > c->revision)
                c->revision = revision;
}

/* An answer the watch has reached tells nothing the view does not know better. */
static bool answer_stale(const ViewClock *c, ViewFrom from, int64_t answer_revision) {
        return from == VIEW_FROM_ANSWER && answer_revision <= c->revision;
}

ViewAction view_put(const ViewClock *c, ViewFrom from, int64_t answer_revision,
                    const ViewStamp *have, int64_t mod_revision) {
        if (answer_stale(c, from, answer_revision))
                return VIEW_IGNORE;
        if (have && mod_revision <= have->mod_revision)
                /* not newer: a range or the watch sees it (again) */
                return from == VIEW_FROM_ANSWER ? VIEW_IGNORE : VIEW_SEEN;
        return VIEW_SET;
}

ViewAction view_delete(const ViewClock *c, ViewFrom from, int64_t revision,
                       const ViewStamp *have) {
        if (answer_stale(c, from, revision) || !have || have->mod_revision > revision)
                return VIEW_IGNORE;
        return VIEW_DROP;
}

/* Only a range and its watch stamp their generation: an entry only an answer put is not
 * "shown" by a range read meanwhile. */
void view_stamp_seen(const ViewClock *c, ViewFrom from, ViewStamp *s) {
        if (from != VIEW_FROM_ANSWER)
                s->generation = c->generation;
}

void view_stamp_set(const ViewClock *c, ViewFrom from, ViewStamp *s, int64_t mod_revision) {
        s->mod_revision = mod_revision;
        view_stamp_seen(c, from, s);
}

bool view_swept(const ViewClock *c, const ViewStamp *s) {
        return s->generation != c->generation && s->mod_revision <= c->range_revision;
}
