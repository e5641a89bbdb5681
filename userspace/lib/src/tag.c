// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Socket tagging: write (tag & mask) << shift into SO_MARK or SO_PRIORITY,
 * or into the DSCP field (the top six bits) of IP_TOS / IPV6_TCLASS.
 *
 * DSCP is the one source that survives the trip out of the host: mark and
 * priority live in the skb and are gone once the packet leaves the network
 * namespace (a veth, a tunnel, the wire), while the DSCP field is in the IP
 * header itself. Writing it needs no capability. The byte written is
 * ((tag & mask) << shift) << 2, so with the defaults (shift 0, mask 0x3f) the
 * DSCP codepoint is the tag itself, which is what a qdisc that reads the top
 * six bits of TOS/TCLASS as its tag expects. The low two bits are ECN; TCP
 * keeps its own, whatever we write.
 *
 * The tagger caches the value it last wrote on each fd (an array indexed by
 * fd, grown on demand) so tagging per tensor costs a setsockopt only when
 * the tag changes. The cache cannot see close()/dup2() behind its back,
 * hence mercury_tagger_forget().
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

/* Cache slot: 0 = unknown, else CACHE_VALID | value written. */
#define CACHE_VALID	(1ULL << 32)

/* DSCP is the TOS/TCLASS byte without its two ECN bits. */
#define DSCP_SHIFT	2

struct mercury_tagger {
	uint64_t *cache;		/* per fd, see CACHE_VALID */
	size_t cache_len;		/* slots */
	uint32_t mask;			/* tag bits, before shift */
	uint32_t field;			/* mask << shift */
	unsigned int shift;		/* bits; DSCP: plus DSCP_SHIFT */
	enum mercury_tag_source source;
	bool keep_other_bits;
	struct mercury_tagger_stats stats;
};

/*
 * Where the value goes on fd: (level, name) for setsockopt, and the name to
 * print. DSCP depends on the socket's family, which the caller may not know
 * (gloo opens IPv4 or IPv6 sockets depending on how the host name
 * resolves); an IPv6 socket talking to an IPv4-mapped peer sends IPv4
 * packets, whose TOS comes from IP_TOS, so it needs both.
 */
struct sockopt_loc {
	int level;
	int name;
	const char *str;
	bool mapped;			/* AF_INET6 with an IPv4-mapped address */
};

const char *mercury_peer_str(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	char ip[INET6_ADDRSTRLEN];
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		ss.ss_family = AF_UNSPEC;
	if (ss.ss_family == AF_INET &&
	    inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip)))
		snprintf(buf, len, "%s:%u (fd %d)", ip, ntohs(s4->sin_port), fd);
	else if (ss.ss_family == AF_INET6 &&
		 inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip)))
		snprintf(buf, len, "[%s]:%u (fd %d)", ip, ntohs(s6->sin6_port),
			 fd);
	else
		snprintf(buf, len, "fd %d", fd);
	return buf;
}

static bool v4_mapped(int fd)
{
	struct sockaddr_in6 a;
	socklen_t len = sizeof(a);

	if (getpeername(fd, (struct sockaddr *)&a, &len) < 0) {
		len = sizeof(a);
		if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
			return false;
	}
	return a.sin6_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a.sin6_addr);
}

static void loc_set(struct sockopt_loc *loc, int level, int name,
		    const char *str)
{
	loc->level = level;
	loc->name = name;
	loc->str = str;
	loc->mapped = false;
}

static int sockopt_loc(const struct mercury_tagger *t, int fd,
		       struct sockopt_loc *loc)
{
	socklen_t len = sizeof(int);
	int family;

	if (t->source == MERCURY_TAG_MARK) {
		loc_set(loc, SOL_SOCKET, SO_MARK, "SO_MARK");
		return 0;
	}
	if (t->source == MERCURY_TAG_PRIORITY) {
		loc_set(loc, SOL_SOCKET, SO_PRIORITY, "SO_PRIORITY");
		return 0;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len) < 0)
		return mercury_err(errno, "getsockopt(%d, SO_DOMAIN): %s", fd,
				   strerror(errno));
	if (family == AF_INET) {
		loc_set(loc, IPPROTO_IP, IP_TOS, "IP_TOS");
		return 0;
	}
	if (family == AF_INET6) {
		loc_set(loc, IPPROTO_IPV6, IPV6_TCLASS, "IPV6_TCLASS");
		loc->mapped = v4_mapped(fd);
		return 0;
	}
	return mercury_err(EAFNOSUPPORT,
			   "fd %d: DSCP needs an IPv4 or IPv6 socket (family %d)",
			   fd, family);
}

/*
 * The most levels a mask carries: the qdisc reads tag = (value >> shift) &
 * mask, so tag survives only if (tag & mask) == tag, and tags 1..L all do
 * only while the mask's low bits up to L's top bit are set.
 */
static unsigned int mask_levels(uint32_t mask)
{
	unsigned int ones = mask == UINT32_MAX ? 32 : __builtin_ctz(~mask);

	if (ones >= 16)
		return MERCURY_MAX_TAG;
	return (1U << ones) - 1;
}

int mercury_tag_settings_check(const char *what, int source,
			       unsigned int shift, uint32_t mask,
			       unsigned int levels)
{
	unsigned int fit = mask_levels(mask);

	if (!mercury_source_name(source))
		return mercury_err(EINVAL, "%s: unknown tag source %d", what,
				   source);
	if (shift > 31)
		return mercury_err(EINVAL, "%s: shift %u outside 0..31", what,
				   shift);
	if (!mask)
		return mercury_err(EINVAL, "%s: mask is 0", what);
	if (source == MERCURY_TAG_DSCP &&
	    (shift > 5 || ((uint64_t)mask << shift) > MERCURY_DSCP_MASK))
		return mercury_err(EINVAL,
				   "%s: mask 0x%x << shift %u does not fit the 6 DSCP bits",
				   what, mask, shift);
	if (((uint64_t)mask << shift) > UINT32_MAX)
		return mercury_err(EINVAL,
				   "%s: mask 0x%x << shift %u does not fit 32 bits",
				   what, mask, shift);
	if (levels > fit && !fit)
		return mercury_err(ERANGE,
				   "%s: %u levels do not fit mask 0x%x: tag 1 would read back as 0 (untagged); the mask must start at bit 0 (move the field with shift)",
				   what, levels, mask);
	if (levels > fit)
		return mercury_err(ERANGE,
				   "%s: %u levels do not fit mask 0x%x; squeeze the plan to %u levels",
				   what, levels, mask, fit);
	return 0;
}

MERCURY_API int mercury_tag_check(const struct mercury_tag_opts *opts,
				  unsigned int levels)
{
	int source;
	uint32_t mask;

	if (!OPTS_VALID(opts, mercury_tag_opts))
		return -errno;
	source = OPTS_GET(opts, source, MERCURY_TAG_MARK);
	mask = OPTS_GET(opts, mask, 0);
	if (!mask)
		mask = source == MERCURY_TAG_DSCP ? MERCURY_DSCP_MASK :
			MERCURY_DEFAULT_MASK;
	return mercury_tag_settings_check("tag settings", source,
					  OPTS_GET(opts, shift, 0), mask,
					  levels);
}

MERCURY_API int mercury_tagger_new(const struct mercury_tag_opts *opts,
				   struct mercury_tagger **out)
{
	struct mercury_tagger *t;
	unsigned int shift;
	uint32_t mask;
	int source, err;

	if (!out)
		return mercury_err(EINVAL, "tagger: out is NULL");
	*out = NULL;
	if (!OPTS_VALID(opts, mercury_tag_opts))
		return -errno;
	source = OPTS_GET(opts, source, MERCURY_TAG_MARK);
	shift = OPTS_GET(opts, shift, 0);
	mask = OPTS_GET(opts, mask, 0);
	if (!mask)
		mask = source == MERCURY_TAG_DSCP ? MERCURY_DSCP_MASK :
			MERCURY_DEFAULT_MASK;
	err = mercury_tag_settings_check("tagger", source, shift, mask, 0);
	if (err)
		return err;
	if (source == MERCURY_TAG_DSCP)
		shift += DSCP_SHIFT;

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

void mercury_tagger_plan_info(const struct mercury_tagger *t,
			      struct mercury_plan_info *pi)
{
	pi->source = t->source;
	pi->shift = t->shift;
	if (t->source == MERCURY_TAG_DSCP)
		pi->shift -= DSCP_SHIFT;	/* the qdisc shifts the DSCP value */
	pi->mask = t->mask;
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
		else if (!strcmp(src, "dscp"))
			opts->source = MERCURY_TAG_DSCP;
		else
			return mercury_err(EINVAL,
					   "MERCURY_TAG_SOURCE=%s: expected mark, priority or dscp",
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
	if (t->source == MERCURY_TAG_DSCP)
		return mercury_err(EPERM, "DSCP 0x%x: refused (EPERM)", value);
	return mercury_err(EPERM,
			   "SO_PRIORITY %u needs CAP_NET_ADMIN (or CAP_NET_RAW); "
			   "without it only "
			   "priorities 0..6 are allowed (tags 0..6 with shift 0), "
			   "or have the administrator set a mark by port", value);
}

static int get_value(const struct mercury_tagger *t, int fd, uint32_t *v)
{
	struct sockopt_loc loc;
	socklen_t len = sizeof(*v);
	int err;

	err = sockopt_loc(t, fd, &loc);
	if (err)
		return err;
	*v = 0;
	if (getsockopt(fd, loc.level, loc.name, v, &len) < 0)
		return mercury_err(errno, "getsockopt(%d, %s): %s", fd,
				   loc.str, strerror(errno));
	return 0;
}

static int set_value(const struct mercury_tagger *t, int fd, uint32_t value)
{
	struct sockopt_loc loc;
	int err;

	err = sockopt_loc(t, fd, &loc);
	if (err)
		return err;
	if (setsockopt(fd, loc.level, loc.name, &value, sizeof(value)) < 0 ||
	    (loc.mapped && setsockopt(fd, IPPROTO_IP, IP_TOS, &value,
				      sizeof(value)) < 0)) {
		err = errno;
		if (err == EPERM)
			return perm_error(t, value);
		return mercury_err(err, "setsockopt(%d, %s, %u): %s", fd,
				   loc.mapped ? "IP_TOS" : loc.str, value,
				   strerror(err));
	}
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
	err = set_value(t, fd, value);
	if (err) {
		*slot = 0;
		return err;
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
	err = set_value(t, fd, value);
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
