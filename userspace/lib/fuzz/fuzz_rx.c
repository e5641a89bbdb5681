// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libFuzzer target: the frame decoder and the receiver. The input is a
 * script: byte 0 is the number of connections (1..4), then records of
 * (connection, length, bytes) fed with mercury_rx_feed() in that order, so
 * frames split anyhow, interleave across connections, repeat or lie.
 * A connection that returned an error is fed no more, as a caller would
 * drop it. Completed tensors must be whole: their length is the total their
 * headers announced, and taking them frees their share of the budget.
 * Bit 4 of byte 0 selects the caller's destinations (opts.dest): every
 * payload goes into one scratch tensor buffer at its offset, where ASan
 * sees any byte written outside [offset, offset + chunk_len).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mercury/mercury.h"

#define MAX_TENSOR	(1 << 20)

static int dest(void *ctx, size_t conn, const struct mercury_frame *f,
		void **dst)
{
	static uint8_t *scratch;

	(void)ctx;
	(void)conn;
	if (f->offset + f->chunk_len > f->total_len || f->total_len > MAX_TENSOR)
		abort();	/* the checks before dest() let it through */
	if (!scratch && !(scratch = malloc(MAX_TENSOR)))
		abort();
	*dst = scratch + f->offset;
	return 0;
}

static int frame_done(void *ctx, size_t conn, const struct mercury_frame *f,
		      void *data, bool tensor_done)
{
	(void)ctx;
	(void)conn;
	(void)tensor_done;
	if (f->chunk_len && !data)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	MERCURY_OPTS(mercury_rx_opts, o, .max_tensor_bytes = MAX_TENSOR,
		     .max_pending = 16, .max_pending_bytes = 4 << 20);
	struct mercury_frame f;
	struct mercury_tensor t;
	struct mercury_rx *rx;
	bool dead[4] = { 0 };
	size_t n, i = 1, len;
	int r;

	if (!size)
		return 0;
	/* the decoder alone, on the first header's worth of bytes */
	if (size >= MERCURY_FRAME_HDR_LEN &&
	    !mercury_frame_decode(data, size, &f) &&
	    (f.offset > f.total_len || f.chunk_len > f.total_len - f.offset))
		abort();
	if (data[0] & 0x10) {
		o.dest = dest;
		o.frame_done = frame_done;
	}
	if (mercury_rx_new(&o, &rx))
		abort();
	n = 1 + data[0] % 4;
	for (size_t c = 0; c < n; c++)
		if (mercury_rx_add(rx, -1) != (int)c)
			abort();
	while (i + 2 <= size) {
		size_t c = data[i] % n;

		len = data[i + 1];
		i += 2;
		if (len > size - i)
			len = size - i;
		if (!dead[c]) {
			r = mercury_rx_feed(rx, c, data + i, len);
			if (r < 0)
				dead[c] = true;
		}
		i += len;
		while (!mercury_rx_next(rx, &t)) {
			if (o.dest || t.len > MAX_TENSOR || (t.len && !t.data))
				abort();
			mercury_tensor_release(&t);
		}
	}
	mercury_rx_free(rx);
	return 0;
}
