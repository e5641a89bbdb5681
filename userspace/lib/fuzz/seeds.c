// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Seed inputs for fuzz_rx: well-formed receiver scripts written with the
 * library's own encoder (two tensors over two connections, chunks split
 * across records), so the fuzzer starts from frames that parse.
 *   seeds DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mercury/mercury.h"

/* Append one record (connection, length, bytes) to s. */
static size_t rec(uint8_t *s, size_t n, uint8_t conn, const void *b,
		  uint8_t len)
{
	s[n++] = conn;
	s[n++] = len;
	memcpy(s + n, b, len);
	return n + len;
}

static size_t chunk(uint8_t *s, size_t n, uint8_t conn, uint32_t id,
		    uint64_t total, uint64_t off, uint32_t len)
{
	struct mercury_frame f = { .tensor_id = id, .tag = (uint16_t)id,
				   .total_len = total, .offset = off,
				   .chunk_len = len };
	uint8_t hdr[MERCURY_FRAME_HDR_LEN], pay[64];

	mercury_frame_encode(&f, hdr, sizeof(hdr));
	memset(pay, (int)id, sizeof(pay));
	n = rec(s, n, conn, hdr, 20);		/* a header split in two */
	n = rec(s, n, conn, hdr + 20, sizeof(hdr) - 20);
	return rec(s, n, conn, pay, (uint8_t)len);
}

static int put(const char *dir, const char *name, const uint8_t *s, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s, 1, n, f) != n || fclose(f))
		return perror(path), 1;
	return 0;
}

int main(int argc, char **argv)
{
	uint8_t s[1024];
	size_t n = 0;

	if (argc != 2)
		return fprintf(stderr, "usage: seeds DIR\n"), 2;
	s[n++] = 1;				/* two connections */
	n = chunk(s, n, 0, 1, 96, 0, 48);
	n = chunk(s, n, 1, 2, 40, 0, 40);
	n = chunk(s, n, 1, 1, 96, 48, 48);
	if (put(argv[1], "two_tensors", s, n))
		return 1;
	n = 0;
	s[n++] = 0;
	n = chunk(s, n, 0, 3, 0, 0, 0);		/* an empty tensor */
	n = chunk(s, n, 0, 4, 64, 32, 32);	/* out of order */
	n = chunk(s, n, 0, 4, 64, 0, 32);
	return put(argv[1], "empty_and_reversed", s, n);
}
