/* SPDX-License-Identifier: MIT */
/* The fleet status page (allocator-status.h): each fleet, its regions, their machines as rows
 * with their slots counted by state and shown as a strip of cells; the machines with faults
 * or draining; the allocation rate; the view's freshness. One pass over the slots (sorted by
 * the door) and one over the machines. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator-status.h"
#include "macro.h"
#include "timestamp.h"

/* The states of a slot document (SPEC §5), in the order shown; any other counts as "other". */
static const char *const states[] = { "available", "online", "held", "reserved", "allocated" };
#define N_STATES ELEMENTSOF(states)
#define STATE_OTHER N_STATES

typedef struct Tally {
        size_t n[N_STATES + 1];
        size_t slots, machines, claimed;
} Tally;

static const char css[] =
        "body{font-family:sans-serif;margin:1em 2em;color:#222;background:#fff}"
        "table{border-collapse:collapse;margin:.5em 0 1em}"
        "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
        "td.n{text-align:right}caption{text-align:left;font-weight:bold}"
        ".strip{white-space:nowrap}.s{display:inline-block;width:10px;height:10px;margin:0 1px;"
        "border:1px solid #888}"
        ".st-available{background:#9c9}.st-online{background:#69c}.st-held{background:#fc6}"
        ".st-reserved{background:#c9f}.st-allocated{background:#c33}.st-other{background:#eee}"
        ".claimed{outline:2px solid #000}.fault{color:#b00}.warn{color:#b00;font-weight:bold}";

static size_t state_index(const char *state) {
        for (size_t i = 0; i < N_STATES; i++)
                if (state && strcmp(state, states[i]) == 0)
                        return i;
        return STATE_OTHER;
}

static const char *state_class(const char *state) {
        size_t i = state_index(state);

        return i < N_STATES ? states[i] : "other";
}

static const char *html_entity(char c) {
        switch (c) {
        case '&':
                return "&amp;";
        case '<':
                return "&lt;";
        case '>':
                return "&gt;";
        case '"':
                return "&quot;";
        case '\'':
                return "&#39;";
        default:
                return NULL;
        }
}

void html_escape_to(FILE *f, const char *s) {
        for (; s && *s; s++) {
                const char *e = html_entity(*s);

                if (e)
                        fputs(e, f);
                else
                        fputc(*s, f);
        }
}

static int strcmp_null(const char *a, const char *b) {
        return strcmp(a ?: "", b ?: "");
}

int status_slot_compare(const void *a, const void *b) {
        const StatusSlot *x = a, *y = b;
        int c = strcmp_null(x->fleet, y->fleet);

        if (c == 0)
                c = strcmp_null(x->region, y->region);
        if (c == 0)
                c = strcmp_null(x->machine_id, y->machine_id);
        if (c == 0)
                c = x->slot_id < y->slot_id ? -1 : x->slot_id > y->slot_id;
        return c;
}

/* The end of the run of slots from i that share a fleet (depth 1), a region too (2), and a
 * machine too (3). */
static size_t run_end(const StatusPage *p, size_t i, size_t end, int depth) {
        const StatusSlot *s = &p->slots[i];
        size_t j = i + 1;

        for (; j < end; j++) {
                const StatusSlot *t = &p->slots[j];

                if (strcmp_null(s->fleet, t->fleet) != 0 ||
                    (depth >= 2 && strcmp_null(s->region, t->region) != 0) ||
                    (depth >= 3 && strcmp_null(s->machine_id, t->machine_id) != 0))
                        break;
        }
        return j;
}

static void tally_range(const StatusPage *p, size_t i, size_t end, Tally *t) {
        *t = (Tally){};
        for (size_t j = i; j < end; j++) {
                const StatusSlot *s = &p->slots[j];

                t->slots++;
                t->n[state_index(s->state)]++;
                t->claimed += s->claimed;
                if (j == i || strcmp_null(s->machine_id, p->slots[j - 1].machine_id) != 0)
                        t->machines++;
        }
}

static void put_counts(FILE *f, const Tally *t) {
        for (size_t k = 0; k <= N_STATES; k++)
                fprintf(f, "<td class=\"n n-%s\">%zu</td>", k < N_STATES ? states[k] : "other",
                        t->n[k]);
        fprintf(f, "<td class=\"n n-claimed\">%zu</td>", t->claimed);
}

static void put_faults(FILE *f, const StatusMachine *m) {
        if (!m) {
                fputs("<span class=\"warn\">no machine document</span>", f);
                return;
        }
        if (m->draining)
                fputs("<span class=\"fault draining\">draining</span> ", f);
        for (char *const *x = m->faults; x && *x; x++) {
                fputs("<span class=\"fault\">", f);
                html_escape_to(f, *x);
                fputs("</span> ", f);
        }
}

static void put_machine_row(FILE *f, const StatusPage *p, size_t i, size_t end) {
        const StatusSlot *s = &p->slots[i];
        Tally t;

        tally_range(p, i, end, &t);
        fputs("<tr class=\"machine\" data-machine=\"", f);
        html_escape_to(f, s->machine_id);
        fputs("\"><td class=\"id\">", f);
        html_escape_to(f, s->machine_id);
        if (s->machine && s->machine->machine_number)
                fprintf(f, " <small>(%" PRIu64 ")</small>", s->machine->machine_number);
        fputs("</td>", f);
        put_counts(f, &t);
        fputs("<td class=\"strip\">", f);
        for (size_t j = i; j < end; j++) {
                const StatusSlot *c = &p->slots[j];

                fprintf(f, "<span class=\"s st-%s%s\" title=\"slot %" PRIu32 ": ",
                        state_class(c->state), c->claimed ? " claimed" : "", c->slot_id);
                html_escape_to(f, c->state ?: "no state");
                fputs(c->claimed ? ", claimed\"></span>" : "\"></span>", f);
        }
        fputs("</td><td class=\"faults\">", f);
        put_faults(f, s->machine);
        fputs("</td></tr>\n", f);
}

static void put_head_row(FILE *f) {
        fputs("<thead><tr><th>Machine</th>", f);
        for (size_t k = 0; k < N_STATES; k++)
                fprintf(f, "<th>%s</th>", states[k]);
        fputs("<th>other</th><th>claimed</th><th>Slots</th><th>Faults</th></tr></thead>\n", f);
}

static void put_region(FILE *f, const StatusPage *p, size_t i, size_t end) {
        const char *region = p->slots[i].region;
        Tally t;

        tally_range(p, i, end, &t);
        fputs("<table class=\"region\" data-region=\"", f);
        html_escape_to(f, region);
        fputs("\"><caption>Region ", f);
        html_escape_to(f, region && region[0] ? region : "(none)");
        fprintf(f, ": %zu machines, %zu slots</caption>\n", t.machines, t.slots);
        put_head_row(f);
        fputs("<tbody>\n", f);
        for (size_t j = i, k; j < end; j = k) {
                k = run_end(p, j, end, 3);
                put_machine_row(f, p, j, k);
        }
        fputs("</tbody><tfoot><tr class=\"total\"><th>total</th>", f);
        put_counts(f, &t);
        fputs("<td></td><td></td></tr></tfoot></table>\n", f);
}

static void put_fleet(FILE *f, const StatusPage *p, size_t i, size_t end) {
        const char *fleet = p->slots[i].fleet;
        Tally t;

        tally_range(p, i, end, &t);
        fputs("<section class=\"fleet\" data-fleet=\"", f);
        html_escape_to(f, fleet);
        fprintf(f, "\" data-machines=\"%zu\" data-slots=\"%zu\"", t.machines, t.slots);
        for (size_t k = 0; k < N_STATES; k++)
                fprintf(f, " data-%s=\"%zu\"", states[k], t.n[k]);
        fputs(">\n<h2>Fleet <span class=\"name\">", f);
        html_escape_to(f, fleet);
        fprintf(f, "</span></h2>\n<p class=\"summary\">%zu machines, %zu slots", t.machines,
                t.slots);
        for (size_t k = 0; k < N_STATES; k++)
                fprintf(f, ", %zu %s", t.n[k], states[k]);
        fprintf(f, ", %zu claimed.</p>\n", t.claimed);
        for (size_t j = i, k; j < end; j = k) {
                k = run_end(p, j, end, 2);
                put_region(f, p, j, k);
        }
        fputs("</section>\n", f);
}

static void put_faulty_machines(FILE *f, const StatusPage *p) {
        size_t n = 0;

        fputs("<section id=\"faults\">\n<h2>Machines with faults or draining</h2>\n", f);
        for (size_t i = 0; i < p->n_machines; i++) {
                const StatusMachine *m = &p->machines[i];

                if (!m->draining && !(m->faults && m->faults[0]))
                        continue;
                if (n++ == 0)
                        fputs("<table><thead><tr><th>Machine</th><th>Faults</th></tr></thead>"
                              "<tbody>\n", f);
                fputs("<tr class=\"faulty\" data-machine=\"", f);
                html_escape_to(f, m->machine_id);
                fputs("\"><td>", f);
                html_escape_to(f, m->machine_id);
                fputs("</td><td class=\"faults\">", f);
                put_faults(f, m);
                fputs("</td></tr>\n", f);
        }
        fputs(n > 0 ? "</tbody></table>\n" : "<p id=\"no-faults\">None.</p>\n", f);
        fputs("</section>\n", f);
}

static void put_summary(FILE *f, const StatusPage *p) {
        char made[RFC3339_MAX];

        rfc3339_format(p->made, made);
        fprintf(f, "<h1>slotd fleet status</h1>\n<p>Made <time id=\"made\" datetime=\"%s\">%s"
                "</time> by this slotd-allocator replica, from its fleet view.</p>\n",
                made, made);
        if (!p->view_ready)
                fputs("<p class=\"warn\" id=\"not-ready\">The fleet view is not read yet: what "
                      "follows may be incomplete.</p>\n", f);
        fprintf(f, "<table id=\"view\">"
                "<tr><th>Fleet view ready</th><td id=\"view-ready\">%s</td></tr>"
                "<tr><th>Revisions (slots, machines, hosts)</th><td id=\"revisions\">%" PRIi64
                ", %" PRIi64 ", %" PRIi64 "</td></tr>"
                "<tr><th>Machines</th><td id=\"machines\" class=\"n\">%zu</td></tr>"
                "<tr><th>Slots</th><td id=\"slots\" class=\"n\">%zu</td></tr>"
                "<tr><th>Claims not yet confirmed</th><td id=\"claims\" class=\"n\">%zu</td></tr>"
                "</table>\n",
                p->view_ready ? "yes" : "no", p->revision_slots, p->revision_machines,
                p->revision_hosts, p->n_machines, p->n_slots, p->n_claims);
        fprintf(f, "<table id=\"rate\">"
                "<tr><th>Allocations in the last minute</th>"
                "<td id=\"allocations-last-minute\" class=\"n\">%" PRIu64 "</td></tr>"
                "<tr><th>Allocations since start</th>"
                "<td id=\"allocations-total\" class=\"n\">%" PRIu64 "</td></tr>"
                "<tr><th>Answered no capacity since start</th>"
                "<td id=\"no-capacity-total\" class=\"n\">%" PRIu64 "</td></tr>"
                "<tr><th>POSTs since start</th><td id=\"posts-total\" class=\"n\">%" PRIu64
                "</td></tr></table>\n",
                p->allocations_last_minute, p->allocations_total, p->no_capacity_total,
                p->posts_total);
}

int status_page_format(const StatusPage *p, char **ret) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        if (!f)
                return -ENOMEM;
        fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                "<title>slotd fleet status</title>\n<style>%s</style>\n</head>\n<body>\n", css);
        put_summary(f, p);
        if (p->n_slots == 0)
                fputs("<p id=\"no-slots\">No slots in the fleet view.</p>\n", f);
        for (size_t i = 0, k; i < p->n_slots; i = k) {
                k = run_end(p, i, p->n_slots, 1);
                put_fleet(f, p, i, k);
        }
        put_faulty_machines(f, p);
        fputs("</body>\n</html>\n", f);
        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        *ret = text;
        return 0;
}
