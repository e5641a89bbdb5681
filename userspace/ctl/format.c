// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Output of one or more Mercury qdiscs: text (tc's spelling, so printed
 * options can be pasted back), JSON (the option keys of "tc -j") and the
 * Prometheus text exposition format for node_exporter's textfile collector.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "mctl.h"

static const char *mctl_untagged_name(uint8_t v)
{
	return v == TC_MERCURY_UNTAGGED_LAST ? "last" : "first";
}

static void mctl_print_opts_text(FILE *f,
				 const struct mercury_qdisc_opts *o)
{
	char line[512];

	mctl_sprint_opts(line, sizeof(line), o, MCTL_ALL_OPTS);
	fprintf(f, " %s\n", line);
}

static void mctl_level_name(char *buf, size_t len, const struct mctl_level *l)
{
	if (l->tag)
		snprintf(buf, len, "%" PRIu32, l->tag);
	else
		snprintf(buf, len, "untagged");
}

void mctl_print_text(FILE *f, const struct mctl_qdisc *qs, size_t n,
		     enum mctl_what what)
{
	char handle[16], parent[16], cls[32], name[16];
	const struct mctl_qdisc *q;
	const struct mctl_level *l;
	size_t i, k;

	for (i = 0; i < n; i++) {
		q = &qs[i];
		mctl_sprint_handle(handle, sizeof(handle), q->handle);
		mctl_sprint_handle(parent, sizeof(parent), q->parent);
		fprintf(f, "qdisc mercury %s dev %s %s%s\n", handle, q->dev,
			q->parent == 0xffffffffu ? "" : "parent ", parent);
		if (what == MCTL_SHOW_ALL)
			mctl_print_opts_text(f, &q->opts);
		fprintf(f, " sent %" PRIu64 " bytes %" PRIu64 " pkt (dropped %"
			PRIu64 ", overlimits %" PRIu64 " requeues %" PRIu64
			")\n backlog %" PRIu64 "b %" PRIu64 "p\n",
			q->c.bytes, q->c.packets, q->c.drops, q->c.overlimits,
			q->c.requeues, q->c.backlog, q->c.qlen);
		if (q->has_xstats)
			fprintf(f,
				" flows %" PRIu32 " levels_active %" PRIu32
				" most_urgent %" PRIu32 " memory_usage %" PRIu32
				"b\n drops_limit %llu drops_memory %llu"
				" inversions_avoided %llu\n"
				" untagged_packets %llu untagged_bytes %llu"
				" share_forced %llu\n"
				" drops_flows %llu drops_flow_limit %llu\n",
				q->x.flows, q->x.levels_active,
				q->x.most_urgent, q->x.memory_usage,
				q->x.drops_limit, q->x.drops_memory,
				q->x.inversions_avoided,
				q->x.untagged_packets, q->x.untagged_bytes,
				q->x.share_forced, q->x.drops_flows,
				q->x.drops_flow_limit);
		for (k = 0; k < q->nlevels; k++) {
			l = &q->levels[k];
			mctl_sprint_handle(cls, sizeof(cls),
					   (q->handle & 0xffff0000u) | l->minor);
			mctl_level_name(name, sizeof(name), l);
			fprintf(f, " level %s (class %s): sent %" PRIu64
				" bytes %" PRIu64 " pkt dropped %" PRIu64
				" backlog %" PRIu64 "b %" PRIu64 "p flows %"
				PRIu32 "\n", name, cls, l->c.bytes, l->c.packets,
				l->c.drops, l->c.backlog, l->c.qlen, l->flows);
		}
	}
}

static void mctl_json_u64(struct json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

/* The standard counters in tc -s -j's order; a level (class) has no
 * overlimits or requeues of its own.
 */
static void mctl_counters_json(struct json_object *o,
			       const struct mctl_counters *c, bool qdisc)
{
	mctl_json_u64(o, "bytes", c->bytes);
	mctl_json_u64(o, "packets", c->packets);
	mctl_json_u64(o, "drops", c->drops);
	if (qdisc) {
		mctl_json_u64(o, "overlimits", c->overlimits);
		mctl_json_u64(o, "requeues", c->requeues);
	}
	mctl_json_u64(o, "backlog", c->backlog);
	mctl_json_u64(o, "qlen", c->qlen);
}

static void mctl_json_str(struct json_object *o, const char *key,
			  const char *v)
{
	json_object_object_add(o, key, json_object_new_string(v));
}

struct json_object *mctl_qdisc_json(const struct mctl_qdisc *q,
				    enum mctl_what what)
{
	struct json_object *o, *opt, *st, *x, *levels, *lv;
	const struct mctl_level *l;
	char buf[32];
	size_t k;

	o = json_object_new_object();
	mctl_json_str(o, "dev", q->dev);
	mctl_json_str(o, "kind", "mercury");
	mctl_sprint_handle(buf, sizeof(buf), q->handle);
	mctl_json_str(o, "handle", buf);
	mctl_sprint_handle(buf, sizeof(buf), q->parent);
	mctl_json_str(o, "parent", buf);

	if (what == MCTL_SHOW_ALL) {
		opt = json_object_new_object();
		mctl_json_u64(opt, "levels", q->opts.levels);
		mctl_json_str(opt, "tag", mctl_source_name(q->opts.source));
		mctl_json_u64(opt, "shift", q->opts.shift);
		mctl_json_u64(opt, "mask", q->opts.mask);
		mctl_json_str(opt, "untagged",
			      mctl_untagged_name(q->opts.untagged));
		mctl_json_u64(opt, "untagged_share", q->opts.share);
		json_object_object_add(opt, "flow_order",
				       json_object_new_boolean(q->opts.flow_order));
		mctl_json_u64(opt, "flows", q->opts.flows);
		mctl_json_u64(opt, "limit", q->opts.limit);
		mctl_json_u64(opt, "memory_limit", q->opts.memory_limit);
		mctl_json_u64(opt, "quantum", q->opts.quantum);
		json_object_object_add(opt, "bypass",
				       json_object_new_boolean(q->opts.bypass));
		mctl_json_u64(opt, "flow_limit", q->opts.flow_limit);
		json_object_object_add(o, "options", opt);
	}

	st = json_object_new_object();
	mctl_counters_json(st, &q->c, true);
	json_object_object_add(o, "stats", st);

	if (q->has_xstats) {
		x = json_object_new_object();
		mctl_json_u64(x, "flows", q->x.flows);
		mctl_json_u64(x, "levels_active", q->x.levels_active);
		mctl_json_u64(x, "most_urgent", q->x.most_urgent);
		mctl_json_u64(x, "memory_usage", q->x.memory_usage);
		mctl_json_u64(x, "drops_limit", q->x.drops_limit);
		mctl_json_u64(x, "drops_memory", q->x.drops_memory);
		mctl_json_u64(x, "inversions_avoided", q->x.inversions_avoided);
		mctl_json_u64(x, "untagged_packets", q->x.untagged_packets);
		mctl_json_u64(x, "untagged_bytes", q->x.untagged_bytes);
		mctl_json_u64(x, "share_forced", q->x.share_forced);
		mctl_json_u64(x, "drops_flows", q->x.drops_flows);
		mctl_json_u64(x, "drops_flow_limit", q->x.drops_flow_limit);
		json_object_object_add(o, "xstats", x);
	}

	levels = json_object_new_array();
	for (k = 0; k < q->nlevels; k++) {
		l = &q->levels[k];
		lv = json_object_new_object();
		mctl_json_u64(lv, "tag", l->tag);
		mctl_sprint_handle(buf, sizeof(buf),
				   (q->handle & 0xffff0000u) | l->minor);
		mctl_json_str(lv, "class", buf);
		mctl_counters_json(lv, &l->c, false);
		mctl_json_u64(lv, "flows", l->flows);
		json_object_array_add(levels, lv);
	}
	json_object_object_add(o, "levels", levels);
	return o;
}

void mctl_print_json(FILE *f, const struct mctl_qdisc *q, size_t n,
		     enum mctl_what what, bool pretty)
{
	struct json_object *arr = json_object_new_array();
	size_t i;

	for (i = 0; i < n; i++)
		json_object_array_add(arr, mctl_qdisc_json(&q[i], what));
	fprintf(f, "%s\n", json_object_to_json_string_ext(arr,
		(pretty ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN) |
		JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(arr);
}

/* Label values escape backslash, double quote and newline. */
static void mctl_prom_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void mctl_prom_labels(FILE *f, const struct mctl_qdisc *q)
{
	char handle[16];

	mctl_sprint_handle(handle, sizeof(handle), q->handle);
	fputs("{dev=\"", f);
	mctl_prom_label(f, q->dev);
	fputs("\",handle=\"", f);
	mctl_prom_label(f, handle);
	fputc('"', f);
}

enum mctl_prom_scope { MCTL_PROM_QDISC, MCTL_PROM_XSTATS, MCTL_PROM_LEVEL };

/* One metric family: its value of a qdisc or of a level. */
struct mctl_prom_family {
	const char		*name;
	const char		*type;
	const char		*help;
	enum mctl_prom_scope	scope;
	const char		*extra;	/* a fixed extra label, or NULL */
	uint64_t (*qval)(const struct mctl_qdisc *q);
	uint64_t (*lval)(const struct mctl_level *l);
};

#define MCTL_QV(fn, expr) \
	static uint64_t fn(const struct mctl_qdisc *q) { return (expr); }
#define MCTL_LV(fn, expr) \
	static uint64_t fn(const struct mctl_level *l) { return (expr); }
MCTL_QV(mctl_q_packets, q->c.packets)
MCTL_QV(mctl_q_bytes, q->c.bytes)
MCTL_QV(mctl_q_drops_limit, q->x.drops_limit)
MCTL_QV(mctl_q_drops_memory, q->x.drops_memory)
MCTL_QV(mctl_q_overlimits, q->c.overlimits)
MCTL_QV(mctl_q_requeues, q->c.requeues)
MCTL_QV(mctl_q_backlog, q->c.backlog)
MCTL_QV(mctl_q_qlen, q->c.qlen)
MCTL_QV(mctl_q_flows, q->x.flows)
MCTL_QV(mctl_q_levels_active, q->x.levels_active)
MCTL_QV(mctl_q_most_urgent, q->x.most_urgent)
MCTL_QV(mctl_q_memory_usage, q->x.memory_usage)
MCTL_QV(mctl_q_inversions, q->x.inversions_avoided)
MCTL_QV(mctl_q_untagged_packets, q->x.untagged_packets)
MCTL_QV(mctl_q_untagged_bytes, q->x.untagged_bytes)
MCTL_QV(mctl_q_share_forced, q->x.share_forced)
MCTL_QV(mctl_q_drops_flows, q->x.drops_flows)
MCTL_QV(mctl_q_drops_flow_limit, q->x.drops_flow_limit)
MCTL_LV(mctl_l_packets, l->c.packets)
MCTL_LV(mctl_l_bytes, l->c.bytes)
MCTL_LV(mctl_l_drops, l->c.drops)
MCTL_LV(mctl_l_backlog, l->c.backlog)
MCTL_LV(mctl_l_qlen, l->c.qlen)
MCTL_LV(mctl_l_flows, l->flows)

static const struct mctl_prom_family mctl_families[] = {
	{ "mercury_packets_total", "counter", "Packets sent by the qdisc.",
	  MCTL_PROM_QDISC, NULL, mctl_q_packets, NULL },
	{ "mercury_bytes_total", "counter", "Bytes sent by the qdisc.",
	  MCTL_PROM_QDISC, NULL, mctl_q_bytes, NULL },
	{ "mercury_drops_total", "counter",
	  "Packets dropped, by the limit that was reached.",
	  MCTL_PROM_XSTATS, "reason=\"limit\"", mctl_q_drops_limit, NULL },
	{ "mercury_drops_total", NULL, NULL,
	  MCTL_PROM_XSTATS, "reason=\"memory\"", mctl_q_drops_memory, NULL },
	{ "mercury_drops_total", NULL, NULL,
	  MCTL_PROM_XSTATS, "reason=\"flows\"", mctl_q_drops_flows, NULL },
	{ "mercury_drops_total", NULL, NULL,
	  MCTL_PROM_XSTATS, "reason=\"flow_limit\"", mctl_q_drops_flow_limit,
	  NULL },
	{ "mercury_overlimits_total", "counter", "Overlimit events.",
	  MCTL_PROM_QDISC, NULL, mctl_q_overlimits, NULL },
	{ "mercury_requeues_total", "counter", "Packets requeued.",
	  MCTL_PROM_QDISC, NULL, mctl_q_requeues, NULL },
	{ "mercury_backlog_bytes", "gauge", "Bytes queued now.",
	  MCTL_PROM_QDISC, NULL, mctl_q_backlog, NULL },
	{ "mercury_backlog_packets", "gauge", "Packets queued now.",
	  MCTL_PROM_QDISC, NULL, mctl_q_qlen, NULL },
	{ "mercury_flows", "gauge", "Flow buckets holding packets now.",
	  MCTL_PROM_XSTATS, NULL, mctl_q_flows, NULL },
	{ "mercury_levels_active", "gauge", "Levels holding flows now.",
	  MCTL_PROM_XSTATS, NULL, mctl_q_levels_active, NULL },
	{ "mercury_most_urgent_tag", "gauge",
	  "Smallest tag ever queued, 0 if none.",
	  MCTL_PROM_XSTATS, NULL, mctl_q_most_urgent, NULL },
	{ "mercury_memory_usage_bytes", "gauge",
	  "Bytes of skb truesize queued now.",
	  MCTL_PROM_XSTATS, NULL, mctl_q_memory_usage, NULL },
	{ "mercury_inversions_avoided_total", "counter",
	  "Packets sent while a less urgent level also held packets.",
	  MCTL_PROM_XSTATS, NULL, mctl_q_inversions, NULL },
	{ "mercury_untagged_packets_total", "counter",
	  "Packets sent from the untagged class.",
	  MCTL_PROM_XSTATS, NULL, mctl_q_untagged_packets, NULL },
	{ "mercury_untagged_bytes_total", "counter",
	  "Bytes sent from the untagged class.",
	  MCTL_PROM_XSTATS, NULL, mctl_q_untagged_bytes, NULL },
	{ "mercury_share_forced_total", "counter",
	  "Untagged packets sent ahead of tagged ones for untagged_share.",
	  MCTL_PROM_XSTATS, NULL, mctl_q_share_forced, NULL },
	{ "mercury_level_packets_total", "counter",
	  "Packets sent from one level.",
	  MCTL_PROM_LEVEL, NULL, NULL, mctl_l_packets },
	{ "mercury_level_bytes_total", "counter",
	  "Bytes sent from one level.",
	  MCTL_PROM_LEVEL, NULL, NULL, mctl_l_bytes },
	{ "mercury_level_drops_total", "counter",
	  "Packets of one level dropped.",
	  MCTL_PROM_LEVEL, NULL, NULL, mctl_l_drops },
	{ "mercury_level_backlog_bytes", "gauge",
	  "Bytes queued at one level now.",
	  MCTL_PROM_LEVEL, NULL, NULL, mctl_l_backlog },
	{ "mercury_level_backlog_packets", "gauge",
	  "Packets queued at one level now.",
	  MCTL_PROM_LEVEL, NULL, NULL, mctl_l_qlen },
	{ "mercury_level_flows", "gauge", "Flows served at one level now.",
	  MCTL_PROM_LEVEL, NULL, NULL, mctl_l_flows },
};

/*
 * The exposition format wants every sample of a family together under one
 * HELP and TYPE line, so we walk family by family, then qdisc by qdisc.
 */
void mctl_print_prometheus(FILE *f, const struct mctl_qdisc *qs, size_t n)
{
	const struct mctl_prom_family *fam;
	const struct mctl_qdisc *q;
	char tag[16];
	size_t i, k, j;

	for (j = 0; j < sizeof(mctl_families) / sizeof(mctl_families[0]); j++) {
		fam = &mctl_families[j];
		if (fam->help)
			fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam->name,
				fam->help, fam->name, fam->type);
		for (i = 0; i < n; i++) {
			q = &qs[i];
			if (fam->scope == MCTL_PROM_XSTATS && !q->has_xstats)
				continue;
			if (fam->scope != MCTL_PROM_LEVEL) {
				fputs(fam->name, f);
				mctl_prom_labels(f, q);
				if (fam->extra)
					fprintf(f, ",%s", fam->extra);
				fprintf(f, "} %" PRIu64 "\n", fam->qval(q));
				continue;
			}
			for (k = 0; k < q->nlevels; k++) {
				mctl_level_name(tag, sizeof(tag), &q->levels[k]);
				fputs(fam->name, f);
				mctl_prom_labels(f, q);
				fprintf(f, ",tag=\"%s\"} %" PRIu64 "\n", tag,
					fam->lval(&q->levels[k]));
			}
		}
	}
}

void mctl_qdiscs_free(struct mctl_qdisc *q, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(q[i].levels);
	free(q);
}
