// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The tensors of a profile as the data plane moves them: sizes scaled by
 * --bytes-scale, sharded evenly over the servers (byte balance, as
 * mercury-sim does), each shard cut into chunks. The profile is the
 * simulator's timeline (mt_profile_load(), userspace/common/profile.c over
 * libmercury's one reader), so gates, priorities and compute times are
 * exactly the ones it simulates.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mercury/mercury.h>

#include "ps.h"

static const char *const scheme_names[] = {
	[PS_VANILLA] = "vanilla",
	[PS_FIFO] = "fifo-stream",
	[PS_PRIO] = "prio",
	[PS_BYTESCHED] = "bytesched",
	[PS_MERCURY] = "mercury",
};

const char *ps_scheme_name(enum ps_scheme s)
{
	return scheme_names[s];
}

int ps_nconns(const struct ps_cfg *cfg)
{
	switch (cfg->scheme) {
	case PS_PRIO:
		return PS_PRIO_BANDS;
	case PS_MERCURY:
		return cfg->channels;
	default:
		return 1;
	}
}

static const struct ps_tensor *sort_base;

/* Most urgent first: the smaller tag of the plan (--plan, else
 * libmercury's default plan); ties: smaller gate, then the tensor whose
 * gradient came last. */
static int cmp_urgency(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;

	if (sort_base[i].prio != sort_base[j].prio)
		return sort_base[i].prio < sort_base[j].prio ? -1 : 1;
	if (sort_base[i].gate != sort_base[j].gate)
		return sort_base[i].gate < sort_base[j].gate ? -1 : 1;
	return j - i;
}

uint64_t ps_scaled_bytes(uint64_t bytes, double scale)
{
	double n = round((double)(bytes / 4) * scale);

	return 4 * (uint64_t)(n < 1 ? 1 : n);
}

static uint64_t fnv(uint64_t h, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++) {
		h ^= (v >> (8 * i)) & 0xff;
		h *= 0x100000001b3ull;
	}
	return h;
}

void ps_layout_free(struct ps_layout *L)
{
	if (!L)
		return;
	mt_profile_free(&L->prof);
	free(L->t);
	free(L->lo);
	free(L->hi);
	free(L->nchunks);
	free(L->base);
	free(L->srv_chunks);
	memset(L, 0, sizeof(*L));
}

uint32_t ps_chunk_len(const struct ps_layout *L, int t, int s, uint32_t c)
{
	size_t k = ps_idx(L, t, s);
	uint64_t len = L->hi[k] - L->lo[k], start = (uint64_t)c * L->chunk;

	if (c >= L->nchunks[k])
		return 0;
	return len - start < L->chunk ? len - start : L->chunk;
}

/*
 * The tags that go on the wire come from libmercury's tag rule
 * (mercury_plan_wire_tag()): the plan (--plan, else the profile's default
 * plan) set to lv levels, squeezed there when its tags do not fit. Without
 * --plan, prio becomes the default plan's tag, so the sender's order is
 * the library's too.
 */
static int ps_wire_tags(struct ps_layout *L, const struct ps_cfg *cfg,
			unsigned int lv, char *err, size_t errlen)
{
	/*
	 * squeezed to lv at once: the same tags as set_levels() below, and
	 * a model of more tensors than the wire has tags builds at all
	 */
	MERCURY_OPTS(mercury_plan_opts, po, .levels = lv);
	struct mercury_plan *p;
	int i, ret;

	ret = cfg->plan ? mercury_plan_load(cfg->plan, &p) :
		mercury_plan_from_profile(cfg->profile, &po, &p);
	if (ret) {
		snprintf(err, errlen, "%s", mercury_last_error());
		return ret;
	}
	for (i = 0; !cfg->plan && i < L->nt; i++) {
		ret = mercury_plan_lookup(p, L->t[i].name);
		if (ret < 0)
			goto out;
		L->t[i].prio = ret;
	}
	ret = mercury_plan_set_levels(p, lv);
	for (i = 0; !ret && i < L->nt; i++) {
		ret = mercury_plan_wire_tag(p, L->t[i].name, NULL);
		if (ret > 0) {
			L->t[i].level = ret;
			ret = 0;
		}
	}
	L->levels = mercury_plan_max_tag(p);
out:
	if (ret < 0)
		snprintf(err, errlen, "%s: %s", cfg->plan ? cfg->plan :
			 cfg->profile, mercury_last_error());
	mercury_plan_free(p);
	return ret < 0 ? ret : 0;
}

/*
 * The tag in each frame's header: Mercury's wire tag; the other schemes
 * (untagged sockets) carry the sender's rank, squeezed into the tags a
 * frame holds by libmercury's rule when the model has more tensors.
 */
static int frame_tags(struct ps_layout *L, const struct ps_cfg *cfg,
		      char *err, size_t errlen)
{
	unsigned int *tag;
	int i, ret;

	if (cfg->scheme == PS_MERCURY) {
		for (i = 0; i < L->nt; i++)
			L->t[i].tag = L->t[i].level;
		return 0;
	}
	tag = calloc((size_t)L->nt + 1, sizeof(*tag));
	if (!tag) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < L->nt; i++)
		tag[i] = L->t[i].rank;
	ret = mercury_plan_squeeze_tags(tag, L->nt, MERCURY_MAX_TAG);
	for (i = 0; !ret && i < L->nt; i++)
		L->t[i].tag = tag[i];
	if (ret)
		snprintf(err, errlen, "%s", mercury_last_error());
	free(tag);
	return ret;
}

int ps_layout_init(struct ps_layout *L, const struct ps_cfg *cfg,
		   char *err, size_t errlen)
{
	int *order = NULL, i, s, S = cfg->servers, lv;
	uint64_t off = 0, h = 0xcbf29ce484222325ull;
	int ret;

	memset(L, 0, sizeof(*L));
	ret = mt_profile_load(cfg->profile, &L->prof, err, errlen);
	if (ret)
		return ret;
	if (cfg->plan) {
		ret = mt_profile_apply_plan(&L->prof, cfg->plan,
					      &L->plan_max_tag, err, errlen);
		if (ret)
			goto fail_early;
	}
	L->nt = L->prof.ntensors;
	L->servers = S;
	/* Every size scales with the tensors (--bytes-scale), so a chunk,
	 * a partition and the credit keep their share of the gradient. */
	L->credit = ps_scaled_bytes(cfg->credit, cfg->bytes_scale);
	if (cfg->scheme == PS_BYTESCHED) {
		/* ByteScheduler sums whole partitions: a partition is spread
		 * over the servers like any tensor, so a server's piece of it
		 * is the aggregation unit. */
		uint64_t part = ps_scaled_bytes(cfg->partition, cfg->bytes_scale);
		uint64_t piece = (part + S - 1) / S;

		L->chunk = (piece + 3) / 4 * 4;
	} else if (cfg->scheme == PS_VANILLA) {
		/* A stock PS sums a server's shard of a tensor when all of it
		 * is in: one frame per shard, so the chunk is the largest. */
		L->chunk = 4;
		for (i = 0; i < L->nt; i++) {
			uint64_t n = ps_scaled_bytes(L->prof.tensors[i].bytes,
						     cfg->bytes_scale) / 4;
			uint64_t shard = 4 * ((n + S - 1) / S);

			if (shard > L->chunk)
				L->chunk = shard;
		}
		if (L->chunk > UINT32_MAX) {
			snprintf(err, errlen, "vanilla: a shard of %llu bytes does not fit one frame: more servers or a smaller --bytes-scale",
				 (unsigned long long)L->chunk);
			ret = -E2BIG;
			goto fail_early;
		}
	} else {
		L->chunk = ps_scaled_bytes(cfg->chunk, cfg->bytes_scale);
	}
	L->t = calloc(L->nt, sizeof(*L->t));
	L->lo = calloc((size_t)L->nt * S, sizeof(*L->lo));
	L->hi = calloc((size_t)L->nt * S, sizeof(*L->hi));
	L->nchunks = calloc((size_t)L->nt * S, sizeof(*L->nchunks));
	L->base = calloc((size_t)L->nt * S, sizeof(*L->base));
	L->srv_chunks = calloc(S, sizeof(*L->srv_chunks));
	order = calloc(L->nt, sizeof(*order));
	if (!L->t || !L->lo || !L->hi || !L->nchunks || !L->base ||
	    !L->srv_chunks || !order) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < L->nt; i++) {
		const struct mt_tensor *m = &L->prof.tensors[i];
		struct ps_tensor *t = &L->t[i];
		uint64_t n;

		t->name = m->name;
		t->bytes = ps_scaled_bytes(m->bytes, cfg->bytes_scale);
		t->off = off;
		t->ready_ms = m->ready_ms;
		t->gate = m->gate;
		t->prio = m->prio;
		off += t->bytes;
		n = t->bytes / 4;
		for (s = 0; s < S; s++) {
			size_t k = ps_idx(L, i, s);
			uint64_t nc;

			L->lo[k] = 4 * (n * s / S);
			L->hi[k] = 4 * (n * (s + 1) / S);
			nc = (L->hi[k] - L->lo[k] + L->chunk - 1) / L->chunk;
			if (nc > UINT32_MAX / 2 ||
			    L->srv_chunks[s] + nc > UINT32_MAX / 2) {
				snprintf(err, errlen, "too many chunks: raise --chunk");
				ret = -E2BIG;
				goto fail;
			}
			L->nchunks[k] = nc;
			L->frames += nc;
			L->base[k] = L->srv_chunks[s];
			L->srv_chunks[s] += nc;
			if (nc > L->tensor_chunks_max)
				L->tensor_chunks_max = nc;
		}
		order[i] = i;
		h = fnv(h, t->bytes);
	}
	L->total_bytes = off;
	/*
	 * Mercury's wire tags: at most `levels`, one per tensor at most. A
	 * channel set keeps tags apart only while it has a connection per
	 * tag in flight (Documentation/tagger.md, "How many levels"); the
	 * sender's heap still orders by rank.
	 */
	lv = cfg->levels > 0 ? cfg->levels : cfg->channels > 0 ? cfg->channels : L->nt;
	if (lv > (int)MERCURY_MAX_TAG)
		lv = MERCURY_MAX_TAG;
	ret = ps_wire_tags(L, cfg, lv, err, errlen);
	if (ret)
		goto fail;
	sort_base = L->t;
	qsort(order, L->nt, sizeof(*order), cmp_urgency);
	for (i = 0; i < L->nt; i++) {
		struct ps_tensor *t = &L->t[order[i]];

		t->rank = i + 1;
		/* 16 bands by forward order, as many tensors in each */
		t->band = (unsigned int)((uint64_t)i * PS_PRIO_BANDS / L->nt);
	}
	ret = frame_tags(L, cfg, err, errlen);
	if (ret)
		goto fail;
	/* Peers must send by the same plan. */
	for (i = 0; cfg->plan && i < L->nt; i++)
		h = fnv(h, (uint64_t)L->t[i].rank << 32 | L->t[i].level);
	h = fnv(h, cfg->scheme);
	h = fnv(h, L->chunk);
	h = fnv(h, cfg->scheme == PS_BYTESCHED ? L->credit : 0);
	h = fnv(h, ps_nconns(cfg));
	h = fnv(h, cfg->scheme == PS_MERCURY ? (uint64_t)lv : 0);
	h = fnv(h, S);
	h = fnv(h, cfg->workers);
	h = fnv(h, cfg->iterations);
	L->hash = h;
	free(order);
	return 0;
fail:
	free(order);
fail_early:
	ps_layout_free(L);
	return ret;
}

int ps_print_priorities(const struct ps_cfg *cfg, char *err, size_t errlen)
{
	struct ps_layout L;
	int i, ret;

	ret = ps_layout_init(&L, cfg, err, errlen);
	if (ret)
		return ret;
	/*
	 * priority: the plan's tag, or without a plan the rank (the
	 * sender's order, libmercury's default plan tag); in gradient-ready
	 * order, as the simulator prints them.
	 */
	for (i = 0; i < L.nt; i++)
		printf("%s\t%ld\t%u\t%u\t%u\n", L.t[i].name,
		       cfg->plan ? L.t[i].prio : (long)L.t[i].rank,
		       L.t[i].rank, L.t[i].level, L.t[i].band);
	ps_layout_free(&L);
	return 0;
}

/*
 * Write the profile with every gradient scaled as the data plane scales
 * it, so mercury-sim simulates exactly the bytes that are sent. libmercury
 * reads and writes it (one reader, one dtype rule).
 */
int ps_emit_profile(const struct ps_cfg *cfg, char *err, size_t errlen)
{
	struct mercury_model_info info;
	struct mercury_model *m;
	size_t i;
	int ret;

	ret = mercury_model_load(cfg->profile, &m);
	if (ret) {
		snprintf(err, errlen, "%s", mercury_last_error());
		return ret;
	}
	mercury_model_get_info(m, &info, sizeof(info));
	for (i = 0; !ret && i < info.nparams; i++) {
		const struct mercury_model_param *p = mercury_model_param(m, i);

		ret = mercury_model_set_numel(m, i,
			ps_scaled_bytes(p->bytes, cfg->bytes_scale) / p->elem_size);
	}
	if (!ret)
		ret = mercury_model_save(m, cfg->emit);
	if (ret)
		snprintf(err, errlen, "%s: %s", cfg->profile, mercury_last_error());
	mercury_model_free(m);
	return ret;
}
