/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internal helpers of the Mercury command-line tools (mercury-place,
 * mercury-sim): a static archive with this header, never installed and no
 * part of libmercury's API. Each helper owns one concept the tools share:
 * reading an input file within a bound, replacing an output file
 * atomically, drawing a PNG with gnuplot without building a script from
 * data, and reading a rate. Functions return 0 or a negative errno and
 * leave a one-line message (no program name, no newline) in err.
 */
#ifndef __MERCURY_TOOLS_H
#define __MERCURY_TOOLS_H

#include <stddef.h>
#include <stdio.h>

#define MT_ERRLEN 512

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

#endif
