// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Socket tagging: write (tag & mask) << shift into SO_MARK or SO_PRIORITY.
 *
 * The tagger caches the value it last wrote on each fd (an array indexed by
 * fd, grown on demand) so tagging per tensor costs a setsockopt only when
 * the tag changes. The cache cannot see close()/dup2() behind its back,
 * hence mercury_tagger_forget().
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

/* Cache slot: 0 = unknown, else CACHE_VALID | value written. */
#define CACHE_VALID	(1ULL << 32)

struct mercury_tagger {
	uint64_t *cache;		/* per fd, see CACHE_VALID */
	size_t cache_len;		/* slots */
	uint32_t mask;			/* tag bits, before shift */
	uint32_t field;			/* mask << shift */
	unsigned int shift;		/* bits */
	enum mercury_tag_source source;
	bool keep_other_bits;
	struct mercury_tagger_stats stats;
};

static int sockopt_name(const struct mercury_tagger *t)
{
	return t->source == MERCURY_TAG_MARK ? SO_MARK : SO_PRIORITY;
}

static const char *sockopt_str(const struct mercury_tagger *t)
{
	return t->source == MERCURY_TAG_MARK ? "SO_MARK" : "SO_PRIORITY";
}

MERCURY_API int mercury_tagger_new(const struct mercury_tag_opts *opts,
				   struct mercury_tagger **out)
{
	struct mercury_tagger *t;
	unsigned int shift;
	uint32_t mask;
	int source;

	if (!out)
		return mercury_err(EINVAL, "tagger: out is NULL");
	*out = NULL;
	if (!OPTS_VALID(opts, mercury_tag_opts))
		return -errno;
	source = OPTS_GET(opts, source, MERCURY_TAG_MARK);
	shift = OPTS_GET(opts, shift, 0);
	mask = OPTS_GET(opts, mask, 0);
	if (!mask)
		mask = MERCURY_DEFAULT_MASK;
	if (source != MERCURY_TAG_MARK && source != MERCURY_TAG_PRIORITY)
		return mercury_err(EINVAL, "tagger: unknown tag source %d",
				   source);
	if (shift > 31 || ((uint64_t)mask << shift) > UINT32_MAX)
		return mercury_err(EINVAL,
				   "tagger: mask 0x%x << shift %u does not fit 32 bits",
				   mask, shift);

	t = calloc(1, sizeof(*t));
	if (!t)
		return mercury_err(ENOMEM, "tagger: out of memory");
	t->source = source;
	t->shift = shift;
	t->mask = mask;
	t->field = mask << shift;
	t->keep_other_bits = OPTS_GET(opts, keep_other_bits, false);
	*out = t;
	return 0;
}

MERCURY_API void mercury_tagger_free(struct mercury_tagger *t)
{
	if (!t)
		return;
	free(t->cache);
	free(t);
}

static int env_uint(const char *name, uint32_t *v)
{
	const char *s = getenv(name);
	unsigned long long x;
	char *end;

	if (!s || !*s)
		return 0;
	errno = 0;
	x = strtoull(s, &end, 0);
	if (errno || *end || x > UINT32_MAX || *s == '-')
		return mercury_err(EINVAL, "%s=%s: not an unsigned 32-bit integer",
				   name, s);
	*v = x;
	return 1;
}

MERCURY_API int mercury_tag_opts_from_env(struct mercury_tag_opts *opts)
{
	const char *src = getenv("MERCURY_TAG_SOURCE");
	uint32_t v;
	int err;

	if (!opts || opts->sz < offsetofend(struct mercury_tag_opts, mask))
		return mercury_err(EINVAL, "tag opts: NULL or too small");
	if (src && *src) {
		if (!strcmp(src, "mark"))
			opts->source = MERCURY_TAG_MARK;
		else if (!strcmp(src, "priority"))
			opts->source = MERCURY_TAG_PRIORITY;
		else
			return mercury_err(EINVAL,
					   "MERCURY_TAG_SOURCE=%s: expected mark or priority",
					   src);
	}
	err = env_uint("MERCURY_SHIFT", &v);
	if (err < 0)
		return err;
	if (err) {
		if (v > 31)
			return mercury_err(EINVAL, "MERCURY_SHIFT=%u: above 31", v);
		opts->shift = v;
	}
	err = env_uint("MERCURY_MASK", &v);
	if (err < 0)
		return err;
	if (err) {
		if (!v)
			return mercury_err(EINVAL, "MERCURY_MASK=0: mask must be non-zero");
		opts->mask = v;
	}
	return 0;
}

MERCURY_API int mercury_tagger_value(const struct mercury_tagger *t,
				     unsigned int tag, uint32_t *value)
{
	if (!t || !value)
		return mercury_err(EINVAL, "tagger: NULL argument");
	if ((tag & t->mask) != tag)
		return mercury_err(ERANGE, "tag %u does not fit mask 0x%x",
				   tag, t->mask);
	*value = tag << t->shift;
	return 0;
}

static int cache_slot(struct mercury_tagger *t, int fd, uint64_t **slot)
{
	size_t n;
	uint64_t *c;

	if ((size_t)fd >= t->cache_len) {
		/* Grow to cover fd; fds are small and dense in practice. */
		n = t->cache_len ? t->cache_len : 64;
		while (n <= (size_t)fd)
			n *= 2;
		c = realloc(t->cache, n * sizeof(*c));
		if (!c)
			return mercury_err(ENOMEM, "tagger: out of memory");
		memset(c + t->cache_len, 0, (n - t->cache_len) * sizeof(*c));
		t->cache = c;
		t->cache_len = n;
	}
	*slot = &t->cache[fd];
	return 0;
}

static int perm_error(const struct mercury_tagger *t, uint32_t value)
{
	if (t->source == MERCURY_TAG_MARK)
		return mercury_err(EPERM,
				   "SO_MARK needs CAP_NET_ADMIN (or CAP_NET_RAW); "
				   "without it use source priority with tags 0..6, "
				   "or have the administrator set the mark by port "
				   "(nft ... meta mark set)");
	return mercury_err(EPERM,
			   "SO_PRIORITY %u needs CAP_NET_ADMIN (or CAP_NET_RAW); "
			   "without it only "
			   "priorities 0..6 are allowed (tags 0..6 with shift 0), "
			   "or have the administrator set a mark by port", value);
}

static int get_value(const struct mercury_tagger *t, int fd, uint32_t *v)
{
	socklen_t len = sizeof(*v);

	if (getsockopt(fd, SOL_SOCKET, sockopt_name(t), v, &len) < 0)
		return mercury_err(errno, "getsockopt(%d, %s): %s", fd,
				   sockopt_str(t), strerror(errno));
	return 0;
}

MERCURY_API int mercury_tag_socket(struct mercury_tagger *t, int fd,
				   unsigned int tag)
{
	uint32_t value, cur;
	uint64_t *slot = NULL;
	int err;

	if (!t || fd < 0)
		return mercury_err(EINVAL, "tag socket: bad tagger or fd %d", fd);
	t->stats.calls++;
	err = mercury_tagger_value(t, tag, &value);
	if (err)
		return err;
	err = cache_slot(t, fd, &slot);
	if (err)
		return err;
	if (t->keep_other_bits) {
		if (*slot & CACHE_VALID) {
			cur = (uint32_t)*slot;
		} else {
			err = get_value(t, fd, &cur);
			if (err)
				return err;
		}
		value |= cur & ~t->field;
	}
	if (*slot == (CACHE_VALID | value))
		return 0;

	t->stats.syscalls++;
	if (setsockopt(fd, SOL_SOCKET, sockopt_name(t), &value,
		       sizeof(value)) < 0) {
		err = errno;
		*slot = 0;
		if (err == EPERM)
			return perm_error(t, value);
		return mercury_err(err, "setsockopt(%d, %s, %u): %s", fd,
				   sockopt_str(t), value, strerror(err));
	}
	*slot = CACHE_VALID | value;
	return 0;
}

MERCURY_API void mercury_tagger_forget(struct mercury_tagger *t, int fd)
{
	if (t && fd >= 0 && (size_t)fd < t->cache_len)
		t->cache[fd] = 0;
}

MERCURY_API int mercury_socket_tag(const struct mercury_tagger *t, int fd)
{
	uint32_t v;
	int err;

	if (!t)
		return mercury_err(EINVAL, "socket tag: NULL tagger");
	err = get_value(t, fd, &v);
	if (err)
		return err;
	return (v >> t->shift) & t->mask;
}

MERCURY_API int mercury_tagger_probe(const struct mercury_tagger *t,
				     unsigned int tag)
{
	uint32_t value;
	int fd, err;

	if (!t)
		return mercury_err(EINVAL, "probe: NULL tagger");
	err = mercury_tagger_value(t, tag, &value);
	if (err)
		return err;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return mercury_err(errno, "probe: socket: %s", strerror(errno));
	err = 0;
	if (setsockopt(fd, SOL_SOCKET, sockopt_name(t), &value,
		       sizeof(value)) < 0)
		err = errno == EPERM ? perm_error(t, value) :
			mercury_err(errno, "probe: setsockopt(%s, %u): %s",
				    sockopt_str(t), value, strerror(errno));
	close(fd);
	return mercury_ret(err);
}

MERCURY_API int mercury_tagger_get_stats(const struct mercury_tagger *t,
					 struct mercury_tagger_stats *st,
					 size_t sz)
{
	if (!t || !st)
		return mercury_err(EINVAL, "tagger stats: NULL argument");
	memset(st, 0, sz);
	memcpy(st, &t->stats, sz < sizeof(t->stats) ? sz : sizeof(t->stats));
	return 0;
}
