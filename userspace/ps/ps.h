/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * mercury-ps: a parameter-server data plane that replays a measured
 * training profile. Workers push each gradient as backward releases it;
 * each server sums a chunk as soon as every worker's copy of it is in
 * (immediate aggregation), applies it to its parameter shard and sends the
 * chunk back to every worker at once. Forward waits, call by call, for its
 * parameters. Under vanilla (a stock PS) the chunk is a server's whole
 * shard of a tensor, so it is summed only when all of it is in.
 * Documentation/benchmark.md describes the method.
 *
 * Wire: every chunk is one libmercury frame (32-byte header, then the
 * payload). tensor_id = tensor index, total_len = the server's shard of
 * the tensor, offset = within that shard. A connection starts with one
 * hello frame (tensor_id PS_HELLO_ID).
 */
#ifndef PS_H
#define PS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <mercury/mercury.h>

#include "tools.h"

#define PS_PROG		"mercury-ps"
#define PS_HELLO_ID	0xffffffffu
#define PS_HELLO_LEN	32		/* hello payload bytes */
#define PS_PRIO_BANDS	16		/* sch_prio bands of the prio scheme */
#define PS_MAX_PEERS	256
#define PS_MAX_CHANNELS	64

enum ps_scheme {
	PS_VANILLA,			/* stock PS: a shard is one frame */
	PS_FIFO,			/* "fifo-stream" */
	PS_PRIO,
	PS_BYTESCHED,
	PS_MERCURY,
	PS_NSCHEMES,
};

/* Everything both roles agree on (and the role's own options). */
struct ps_cfg {
	const char *profile;
	const char *plan;		/* --plan: send priorities, NULL = gates */
	bool print_priorities;		/* print the layout's order and exit */
	enum ps_scheme scheme;
	int channels;			/* mercury: connections per peer */
	int levels;			/* mercury: tags on the wire (0: channels) */
	uint64_t chunk;			/* aggregation unit, bytes, full size */
	uint64_t partition;		/* bytesched partition, bytes, full size */
	uint64_t credit;		/* bytesched in-flight window, full size */
	double bytes_scale;		/* tensor sizes x this */
	double time_scale;		/* compute times x this */
	int iterations;
	int workers, servers;
	int worker_id, server_id;
	enum mercury_tag_source tag_source;
	int timeout_ms;			/* longest wait without progress */
	int sndbuf;			/* SO_SNDBUF/SO_RCVBUF, 0 = kernel's */
	uint64_t inflight;		/* mercury: bytes queued per connection */
	bool json;
	const char *listen;		/* server: host:port */
	const char *server_list;	/* host:port,... (index = server id) */
	const char *emit;		/* profile: output path */
};

struct ps_tensor {
	const char *name;
	uint64_t bytes;			/* scaled, multiple of 4 */
	uint64_t off;			/* in the flat gradient buffer */
	double ready_ms;		/* unscaled, since backward start */
	int gate;			/* forward call that needs it */
	long prio;			/* the plan's tag (--plan, else the
					 * profile's default plan) */
	unsigned int rank;		/* 1 = most urgent: the sender's order */
	unsigned int level;		/* mercury: the tag on the wire,
					 * mercury_plan_wire_tag()'s */
	unsigned int tag;		/* in the frame header: level
					 * (mercury), else rank squeezed to
					 * 1..MERCURY_MAX_TAG */
	unsigned int band;		/* prio: 0..15, 0 most urgent */
};

/* Tensors, their shards on the servers and the chunk grid. */
struct ps_layout {
	struct mt_profile prof;
	int nt;
	struct ps_tensor *t;
	uint64_t total_bytes;		/* scaled */
	int servers;
	uint64_t chunk;			/* bytes per chunk, scaled (bytesched: a
					 * server's piece of a partition;
					 * vanilla: the largest shard) */
	uint64_t credit;		/* bytesched window, scaled */
	uint64_t frames;		/* chunks of one iteration, all servers */
	/* per tensor t and server s, at [t * servers + s] */
	uint64_t *lo, *hi;		/* shard bytes within the tensor */
	uint32_t *nchunks;		/* chunks of the shard */
	uint32_t *base;			/* first chunk in the server's numbering */
	uint32_t *srv_chunks;		/* chunks per server */
	uint32_t tensor_chunks_max;
	unsigned int levels;		/* mercury: the highest wire tag */
	unsigned int plan_max_tag;	/* --plan: largest tag, else 0 */
	uint64_t hash;			/* of everything peers must agree on */
};

/* Layout */
int ps_layout_init(struct ps_layout *L, const struct ps_cfg *cfg,
		   char *err, size_t errlen);
void ps_layout_free(struct ps_layout *L);
static inline size_t ps_idx(const struct ps_layout *L, int t, int s)
{
	return (size_t)t * L->servers + s;
}
/* Bytes of chunk c of tensor t's shard on server s. */
uint32_t ps_chunk_len(const struct ps_layout *L, int t, int s, uint32_t c);
/* Gradient value of worker w for element i of tensor t (exact in fp32). */
static inline float ps_grad_value(int w, int t, uint64_t i)
{
	return (float)((w + 1) + (int)((i + 7 * (uint64_t)t) % 13));
}
/* Parameter every worker must hold after `iterations` updates. */
static inline float ps_expected_param(int workers, int iterations, int t,
				      uint64_t i)
{
	int64_t sum = (int64_t)workers * (workers + 1) / 2 +
		      (int64_t)workers * (int)((i + 7 * (uint64_t)t) % 13);

	return (float)(-(int64_t)iterations * sum);
}
/* A full-size byte count as the data plane scales it (multiple of 4). */
uint64_t ps_scaled_bytes(uint64_t bytes, double scale);
int ps_emit_profile(const struct ps_cfg *cfg, char *err, size_t errlen);
/* --print-priorities: tensor, priority, rank, level, band per line. */
int ps_print_priorities(const struct ps_cfg *cfg, char *err, size_t errlen);

/* Hello: the first frame of every connection, worker to server. */
struct ps_hello {
	uint32_t worker_id, conn_idx, nconns, workers, server_id, servers;
	uint64_t hash;
};
void ps_hello_encode(uint8_t *buf, const struct ps_hello *h);
void ps_hello_decode(const uint8_t *buf, struct ps_hello *h);

/*
 * Connections. Every byte goes through libmercury: each peer has one
 * channel set (the sender: priority order, in-flight cap, tagging,
 * partial writes) and one receiver (header checks, coverage, payload
 * straight into the destination the role picks) over its connections.
 */
struct ps_hello_rx;

struct ps_conn {
	int fd;
	int peer;			/* worker or server index */
	int idx;			/* connection index at that peer */
	char addr[256];		/* peer's host:port, for messages */
	bool eof;
	uint8_t *stage;			/* server: one chunk */
	uint8_t hello[PS_HELLO_LEN];
	struct ps_hello_rx *hello_rx;	/* server: reads the hello only */
	int64_t last_in_ns;		/* when bytes last arrived (0: never) */
};

/* One peer: the sender toward it and the receiver from it. */
struct ps_peer {
	struct mercury_chanset *cs;
	struct mercury_rx *rx;
	struct ps_conn *conns;		/* its connections, by index */
	int n;				/* connections */
	int id;				/* worker or server index */
	void *role;			/* struct wrk or struct srv */
};
/*
 * Open peer p's sender and receiver over its n connections (conns[i].fd):
 * Mercury's set picks connections (classes, --inflight, tags of the plan
 * level); the other schemes' frames are pinned to a connection the role
 * chooses, untagged by the set. dest and done: the role's receiver.
 */
int ps_peer_open(struct ps_peer *p, const struct ps_cfg *cfg,
		 unsigned int levels, uint64_t chunk,
		 int (*dest)(void *, size_t, const struct mercury_frame *, void **),
		 int (*done)(void *, size_t, const struct mercury_frame *, void *, bool));
void ps_peer_close(struct ps_peer *p);
/*
 * Queue a frame toward p: conn < 0 lets the set pick (in order of key,
 * Mercury); else it goes to that connection in queue order.
 */
int ps_send(struct ps_peer *p, uint32_t tensor_id, unsigned int tag,
	    uint64_t total, uint64_t offset, const void *payload, uint32_t len,
	    uint64_t key, int conn);
/* Queue connection i's hello (untagged: before any tagged byte). */
int ps_send_hello(struct ps_peer *p, int i, const struct ps_hello *h);
/*
 * Drive p's sender; 1 bytes went, 0 none, <0 -errno with *bad the
 * connection that failed.
 */
int ps_peer_progress(struct ps_peer *p, int64_t now, struct ps_conn **bad);
/* Read connection i; frames completed, -EAGAIN nothing, -ENOTCONN EOF. */
int ps_peer_read(struct ps_peer *p, int i, int64_t now);
/* Bytes written to and read from p, all connections. */
void ps_peer_bytes(const struct ps_peer *p, uint64_t *out, uint64_t *in);
/* Preferred tag of each of n connections for `levels` tags. */
void ps_mercury_classes(unsigned int *classes, int n, unsigned int levels);
/* The senders' counters, summed, as "sender" (and "inversions") in o. */
struct json_object;
void ps_sender_report(struct json_object *o, const struct ps_peer *p, int n);

/* ByteScheduler's partitions, waiting for credit: a min-heap by key. */
struct ps_part {
	uint64_t key;			/* rank << 40 | release order */
	int tensor, server;
	unsigned int rank;		/* the tensor's: the credit rule */
	uint64_t total, offset;
	const uint8_t *payload;
	uint32_t len;
};
struct ps_heap {
	struct ps_part *v;
	size_t n, cap;
};
int ps_heap_push(struct ps_heap *h, const struct ps_part *o);
const struct ps_part *ps_heap_top(const struct ps_heap *h);
void ps_heap_pop(struct ps_heap *h);
void ps_heap_free(struct ps_heap *h);

void ps_conn_close(struct ps_conn *c);
int ps_set_nonblock(int fd);
int ps_sock_opts(int fd, const struct ps_cfg *cfg);
int ps_parse_hostport(const char *s, char *host, size_t hlen, char *port,
		      size_t plen);
int ps_prio_band(int fd, unsigned int band);


/* Time */
int64_t ps_now_ns(void);
/* A read error that means the peer sent bytes that are not our frames. */
bool ps_err_malformed(int err);
/* ppoll() for at most wait_ns (negative: 0); 0 when interrupted, -errno
 * on failure, else the number of ready descriptors. */
struct pollfd;
int ps_poll_ns(struct pollfd *pfd, unsigned int n, int64_t wait_ns);

/* Errors: print "mercury-ps: ..." (or {"error": ...} with -j). */
void ps_error(const struct ps_cfg *cfg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Options */
int ps_parse_args(int argc, char **argv, struct ps_cfg *cfg);
int ps_nconns(const struct ps_cfg *cfg);
const char *ps_scheme_name(enum ps_scheme s);
void ps_usage(FILE *f);

int ps_server_main(struct ps_cfg *cfg);
int ps_worker_main(struct ps_cfg *cfg);

#endif
