/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internal helpers of the Mercury command-line tools (mercury-place,
 * mercury-sim, mercury-ps): a static archive with this header, never
 * installed and no part of libmercury's API. Each helper owns one concept
 * the tools share: reading an input file within a bound, replacing an
 * output file atomically, drawing a PNG with gnuplot without building a
 * script from data, reading rates, sizes and durations, the network rule
 * and a profile's timeline. Functions return 0 or a negative errno and
 * leave a one-line message (no program name, no newline) in err.
 */
#ifndef __MERCURY_TOOLS_H
#define __MERCURY_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MT_ERRLEN 512

/* The message (printf) into err, where err is not NULL; returns ret. */
int mt_set_err(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

struct json_object;

/*
 * The whole of a regular file or a pipe, NUL-terminated, through
 * libmercury's bounded reader (64 MiB): a directory or a device is
 * refused before anything is read.
 */
int mt_read_file(const char *path, char **buf, size_t *len, char *err,
		 size_t errlen);
/* The same, parsed as one JSON value ("PATH: line N: ..." on error). */
int mt_read_json(const char *path, struct json_object **out, char *err,
		 size_t errlen);

/*
 * buf as the file path, whole or not at all: libmercury's writer
 * (mercury_write_file(), src/file.c) with its message in err.
 */
int mt_write_file(const char *path, const void *buf, size_t len, char *err,
		  size_t errlen);

/*
 * A PNG drawn by gnuplot from a fixed script. The script is a program
 * constant; everything that comes from data travels as data: the rows
 * (ARG1 names the private file that holds them) and strings such as a
 * title (ARG2.., at most 8), which the script uses as string values. The
 * PNG comes back on gnuplot's standard output into an mt_out, so gnuplot
 * never opens a path it was given (gnuplot reads "|cmd" and "<cmd" as
 * commands).
 */
struct mt_plot {
	const char *script;		/* fixed gnuplot text */
	const char *data;		/* the rows: ARG1 */
	size_t len;
	const char *const *args;	/* ARG2..: NULL-terminated, or NULL */
	const char *out;		/* the PNG to write */
};

int mt_plot_png(const struct mt_plot *p, char *err, size_t errlen);
/*
 * Write s as one double-quoted field of a gnuplot data file: characters
 * that could end the field, the line or start a comment (quotes, blanks,
 * control characters, '#', backslash) become '_'.
 */
void mt_plot_label(FILE *f, const char *s);

/*
 * A rate as tc reads rates (10gbit, 100mbit, 2.5e9bit; 1.25gbps is bytes
 * per second): libmercury's grammar. A bare number is bit/s, tc's meaning,
 * where bare_ok; else it is refused with the units to use. Result in bit/s.
 */
int mt_parse_rate(const char *s, int bare_ok, double *bps, char *err,
		  size_t errlen);
/* A duration: a finite number >= 0 with s, ms, us, ns or none (s). */
int mt_parse_seconds(const char *s, double *sec);
/* A size as libmercury reads sizes (64k = 65536), 1..2^60 bytes. */
int mt_parse_bytes(const char *s, uint64_t *bytes);

/*
 * The network: one owner of the rule (net.c) for mercury-place's
 * scheduler, its pipeline model and mercury-sim.  Each device is behind
 * one full-duplex NIC (its own, or its host's): a transfer a -> b holds
 * a's NIC egress and b's NIC ingress together (each serves one transfer
 * at a time) for lat + bytes / min(the two rates).  Only pairs given a
 * link (link_Bps > 0: NVLink, or every pair of a per-pair cluster) have
 * their own link each direction instead, shared with nothing.
 */
struct mt_net {
	int ndev;		/* devices */
	int nnic;		/* NICs (devices, or hosts) */
	int *nic;		/* per device: its NIC, 0..nnic-1 */
	double *nic_Bps;	/* per NIC, each direction, bytes/s */
	double *nic_lat_s;	/* per NIC, seconds */
	double *link_Bps;	/* ndev*ndev [a*ndev+b]; 0: through the NICs */
	double *link_lat_s;	/* ndev*ndev */
};

enum { MT_ROUTE_NONE, MT_ROUTE_NIC, MT_ROUTE_LINK };

struct mt_route {
	int kind;		/* MT_ROUTE_*; NONE: a == b */
	int egress, ingress;	/* NIC indices (MT_ROUTE_NIC), else -1 */
	double Bps, lat_s;	/* the transfer's rate and latency */
};

/* Every device on its own NIC (rates 0: the caller fills them). */
int mt_net_init(struct mt_net *n, int ndev);
void mt_net_free(struct mt_net *n);
/* What a transfer from device a to b holds, and at which rate. */
int mt_net_route(const struct mt_net *n, int a, int b, struct mt_route *r);
/*
 * The same rule in the fluid limit: each of `senders` NICs spreads its
 * bytes evenly over `receivers` NICs, all at once; the rate one sender
 * gets (every receiver's ingress is shared by senders / receivers flows).
 */
double mt_net_spread_Bps(double nic_Bps, double senders, double receivers);

/*
 * A profile as a timeline (profile.c), what mercury-sim simulates and
 * mercury-ps sends: read by libmercury (mercury_model_load()), so the
 * gates, priorities and compute times are the same in both.
 */
struct mt_tensor {
	char *name;		/* parameter name from the profile */
	uint64_t bytes;		/* payload on the wire (numel * dtype) */
	double ready_ms;	/* gradient ready, since backward start */
	int gate;		/* forward call that needs it */
	long prio;		/* send priority, smaller = more urgent:
				 * gate, or the plan's tag (--plan) */
};

struct mt_profile {
	char *model;		/* model name */
	int ncalls;		/* forward calls, in execution order */
	double *call_ms;	/* compute attributed to each call */
	double prelude_ms;	/* forward compute before the first call */
	double fwd_ms;		/* forward: prelude + sum of call_ms */
	double bwd_ms;		/* backward total */
	int ntensors;
	struct mt_tensor *tensors;	/* in gradient-ready order */
	uint64_t total_bytes;	/* sum of tensor bytes */
};

/* Most calls, and most tensors, a timeline holds (-E2BIG beyond). */
#define MT_PROFILE_MAX (1u << 22)

/* An h200 *.json or pipedream *.graph.txt profile; 0 or -errno. */
int mt_profile_load(const char *path, struct mt_profile *prof, char *err,
		    size_t errlen);
void mt_profile_free(struct mt_profile *prof);
/*
 * Take every tensor's send priority from the plan at path (libmercury's
 * loader: a tag per tensor name); the gates stay the profile's. A tensor
 * the plan does not name is an error naming it. On success *max_tag (may
 * be NULL) is the largest tag among the profile's tensors.
 */
int mt_profile_apply_plan(struct mt_profile *prof, const char *path,
			  unsigned int *max_tag, char *err, size_t errlen);

#endif
