/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * mercury-sim: training-iteration simulator for parameter-server data
 * parallelism under different gradient/parameter link schedulers.
 * The model is described in Documentation/simulator.md; the comments
 * here only say what each field means and in which unit.
 */
#ifndef MSIM_H
#define MSIM_H

#include <stddef.h>
#include <stdint.h>

/* the profile as a timeline (struct mt_profile), shared with mercury-ps */
#include "tools.h"

enum msim_scheme {
	MSIM_VANILLA,		/* stock PS: backward order, whole tensors */
	MSIM_FIFO,		/* "fifo-stream": backward order, streamed */
	MSIM_PRIO,
	MSIM_BYTESCHED,
	MSIM_MERCURY,
	MSIM_IDEAL,
	MSIM_NSCHEMES,
};

struct msim_params {
	int workers;		/* data-parallel workers */
	int servers;		/* parameter servers */
	double bandwidth_bps;	/* per host link, each direction, bit/s */
	double latency_s;	/* one-way sender->receiver latency, s */
	uint64_t partition;	/* bytesched partition size, bytes */
	uint64_t credit;	/* bytesched in-flight bytes window */
	double msg_overhead_s;	/* start-up cost per message (stream), s */
	double frame_cost_s;	/* least time a frame holds its sender, s */
	int frame_hdr;		/* data-plane header bytes per frame */
	uint64_t slice;		/* framework slicing for the other schemes,
				 * bytes; 0 = one message per tensor */
	uint64_t chunk;		/* streaming-aggregation unit of fifo-stream,
				 * prio, mercury and ideal, bytes; 0 = auto */
	int mtu;		/* IP MTU, bytes */
	int hdr;		/* per-packet header bytes on the wire */
	int iterations;		/* simulated iterations (>= 2) */
	double time_scale;	/* multiplies every compute time */
	/* Optional: called once per chunk when its last byte leaves a link
	 * (link 0 = push, 1 = pull); chunk counts from 0 within its tensor;
	 * times in seconds since backward start. */
	void (*trace)(void *ctx, int link, int tensor, int chunk,
		      double start, double end);
	void *trace_ctx;
};

/* Least time a data-plane frame holds its sender's path, measured on
 * mercury-ps (bench/frame-cost.sh; Documentation/simulator.md). */
#define MSIM_FRAME_COST 4.4e-6

/* Most chunks (per direction) one run may hold: msim_run returns -E2BIG
 * beyond it rather than allocating gigabytes. */
#define MSIM_MAX_CHUNKS (1 << 22)

struct msim_result {
	double iteration_ms;	/* mean of iterations 1..n-1 */
	double first_ms;	/* iteration 0 (no pull to wait for) */
	double stall_ms;	/* forward time lost waiting for pulls */
	double push_done_ms;	/* last push byte, since backward start */
	long events;		/* events processed, for the curious */
};

/* Defaults; documented in Documentation/simulator.md. */
void msim_params_default(struct msim_params *p);

/* Check the parameters; 0 or -EINVAL with a reason in err. */
int msim_params_check(const struct msim_params *p, char *err, size_t errlen);

/* Simulate one scheme; 0 or negative errno. */
int msim_run(const struct mt_profile *prof, const struct msim_params *p,
	     enum msim_scheme scheme, struct msim_result *res);

const char *msim_scheme_name(enum msim_scheme s);
int msim_scheme_parse(const char *s);	/* scheme or -1; "fifo" is fifo-stream */

/* Data-plane frames of a stream of `bytes`: the sum over servers of the
 * chunks of its shard (mercury-ps's layout). */
double msim_stream_frames(uint64_t bytes, int servers, uint64_t chunk);

/* Bandwidth where pushing every gradient once takes as long as one
 * forward+backward pass (bit/s). */
/* The default chunk (--chunk 0): 64 KiB, doubled until one frame's wire
 * time on a worker's path covers the per-frame cost. */
uint64_t msim_auto_chunk(const struct msim_params *p);

double msim_balanced_bps(const struct mt_profile *prof,
			 const struct msim_params *p);

#endif
