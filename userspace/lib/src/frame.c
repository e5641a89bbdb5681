// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Framing: a fixed 32-byte header in network byte order before each chunk,
 * so a receiver can put chunks of one tensor arriving on several
 * connections back together. Fields are written byte by byte: no packed
 * structs, no alignment assumptions about the caller's buffer.
 */
#include <endian.h>
#include <string.h>

#include "internal.h"

static void put16(unsigned char *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(unsigned char *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(unsigned char *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

MERCURY_API int mercury_frame_encode(const struct mercury_frame *f, void *buf,
				     size_t len)
{
	unsigned char *p = buf;

	if (!f || !buf)
		return mercury_err(EINVAL, "frame encode: NULL argument");
	if (len < MERCURY_FRAME_HDR_LEN)
		return mercury_err(ENOSPC, "frame encode: buffer of %zu < %d bytes",
				   len, MERCURY_FRAME_HDR_LEN);
	if (f->offset > f->total_len ||
	    f->chunk_len > f->total_len - f->offset)
		return mercury_err(EINVAL,
				   "frame encode: chunk [%llu, +%u) outside tensor of %llu",
				   (unsigned long long)f->offset, f->chunk_len,
				   (unsigned long long)f->total_len);
	put32(p + 0, MERCURY_FRAME_MAGIC);
	p[4] = MERCURY_FRAME_VERSION;
	p[5] = 0;
	put16(p + 6, f->tag);
	put32(p + 8, f->tensor_id);
	put32(p + 12, f->chunk_len);
	put64(p + 16, f->total_len);
	put64(p + 24, f->offset);
	return MERCURY_FRAME_HDR_LEN;
}

MERCURY_API int mercury_frame_decode(const void *buf, size_t len,
				     struct mercury_frame *f)
{
	const unsigned char *p = buf;

	if (!f || !buf)
		return mercury_err(EINVAL, "frame decode: NULL argument");
	if (len < MERCURY_FRAME_HDR_LEN) {
		errno = EAGAIN;
		return -EAGAIN;
	}
	if (get32(p) != MERCURY_FRAME_MAGIC || p[5])
		return mercury_err(EBADMSG, "frame: bad magic 0x%08x or flags 0x%02x",
				   get32(p), p[5]);
	if (p[4] != MERCURY_FRAME_VERSION)
		return mercury_err(EPROTONOSUPPORT, "frame: version %u, expected %u",
				   p[4], MERCURY_FRAME_VERSION);
	f->tag = get16(p + 6);
	f->tensor_id = get32(p + 8);
	f->chunk_len = get32(p + 12);
	f->total_len = get64(p + 16);
	f->offset = get64(p + 24);
	if (f->offset > f->total_len ||
	    f->chunk_len > f->total_len - f->offset)
		return mercury_err(EINVAL,
				   "frame: chunk [%llu, +%u) outside tensor %u of %llu bytes",
				   (unsigned long long)f->offset, f->chunk_len,
				   f->tensor_id, (unsigned long long)f->total_len);
	return MERCURY_FRAME_HDR_LEN;
}
