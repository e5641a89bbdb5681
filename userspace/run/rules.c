// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* Parse and match mercury-run rules (see rules.h for the syntax). */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

static int num(const char *s, size_t len, unsigned long max,
	       unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (!len || len > 10)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_addr(struct mrun_rule *r, const char *s, size_t len)
{
	char buf[64];
	const char *slash = NULL, *end = s + len;
	unsigned long pfx;
	size_t alen;

	if (*s == '[') {
		const char *close = memchr(s, ']', len);

		if (!close)
			return -1;
		alen = close - s - 1;
		if (alen >= sizeof(buf))
			return -1;
		memcpy(buf, s + 1, alen);
		buf[alen] = 0;
		if (close + 1 < end) {
			if (close[1] != '/')
				return -1;
			slash = close + 1;
		}
		r->family = AF_INET6;
		if (inet_pton(AF_INET6, buf, r->addr) != 1)
			return -1;
		r->prefix = 128;
	} else {
		slash = memchr(s, '/', len);
		alen = slash ? (size_t)(slash - s) : len;
		if (alen >= sizeof(buf))
			return -1;
		memcpy(buf, s, alen);
		buf[alen] = 0;
		r->family = AF_INET;
		if (inet_pton(AF_INET, buf, r->addr) != 1)
			return -1;
		r->prefix = 32;
	}
	if (slash) {
		if (num(slash + 1, end - slash - 1, r->prefix, &pfx))
			return -1;
		r->prefix = pfx;
	}
	r->has_addr = true;
	return 0;
}

/* One term [s, s + len) of rule r. */
static int parse_term(struct mrun_rule *r, const char *s, size_t len,
		      bool *has_tag, bool *is_default, char *err, size_t errlen)
{
	unsigned long lo, hi, tag;
	const char *dash;

	if (len == 7 && !memcmp(s, "default", 7)) {
		*is_default = true;
		return 0;
	}
	if (len > 4 && !memcmp(s, "tag=", 4)) {
		if (*has_tag || num(s + 4, len - 4, UINT_MAX, &tag))
			goto bad;
		r->tag = tag;
		*has_tag = true;
		return 0;
	}
	if (len > 5 && !memcmp(s, "port=", 5)) {
		if (r->has_port)
			goto bad;
		s += 5;
		len -= 5;
		dash = memchr(s, '-', len);
		if (dash) {
			if (num(s, dash - s, 65535, &lo) ||
			    num(dash + 1, s + len - dash - 1, 65535, &hi) ||
			    lo > hi)
				goto bad_port;
		} else {
			if (num(s, len, 65535, &lo))
				goto bad_port;
			hi = lo;
		}
		r->port_lo = lo;
		r->port_hi = hi;
		r->has_port = true;
		return 0;
	}
	if (len > 5 && !memcmp(s, "addr=", 5)) {
		if (r->has_addr || parse_addr(r, s + 5, len - 5)) {
			snprintf(err, errlen,
				 "bad address \"%.*s\" (IPv4[/len] or [IPv6][/len])",
				 (int)len - 5, s + 5);
			return -EINVAL;
		}
		return 0;
	}
bad:
	snprintf(err, errlen,
		 "bad term \"%.*s\" (port=LO[-HI], addr=A[/LEN], default, tag=N; once each)",
		 (int)len, s);
	return -EINVAL;
bad_port:
	snprintf(err, errlen, "bad port range \"%.*s\" (0..65535, LO <= HI)",
		 (int)len, s);
	return -EINVAL;
}

int mrun_rules_parse(const char *s, struct mrun_rule **rules, size_t *n,
		     char *err, size_t errlen)
{
	struct mrun_rule *v = NULL, *nv;
	size_t cnt = 0, rlen, tlen;
	const char *rend, *t, *tend;
	bool has_tag, is_default;
	int ret;

	*rules = NULL;
	*n = 0;
	while (*s) {
		rend = strchr(s, ',');
		rlen = rend ? (size_t)(rend - s) : strlen(s);
		nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv) {
			free(v);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		v = nv;
		memset(&v[cnt], 0, sizeof(*v));
		has_tag = is_default = false;
		for (t = s; t < s + rlen; t = tend + 1) {
			/* A ':' inside [IPv6] brackets does not end a term. */
			tend = t;
			if (!strncmp(t, "addr=[", 6)) {
				tend = memchr(t, ']', s + rlen - t);
				if (!tend)
					tend = s + rlen;
			}
			tend = memchr(tend, ':', s + rlen - tend);
			if (!tend)
				tend = s + rlen;
			tlen = tend - t;
			ret = parse_term(&v[cnt], t, tlen, &has_tag, &is_default,
					 err, errlen);
			if (ret) {
				free(v);
				return ret;
			}
		}
		if (!has_tag || (is_default && (v[cnt].has_port ||
						v[cnt].has_addr)) ||
		    (!is_default && !v[cnt].has_port && !v[cnt].has_addr)) {
			snprintf(err, errlen,
				 "rule \"%.*s\" needs one tag=N and a match (port=, addr= or default alone)",
				 (int)rlen, s);
			free(v);
			return -EINVAL;
		}
		cnt++;
		s += rlen;
		if (*s == ',')
			s++;
	}
	*rules = v;
	*n = cnt;
	return 0;
}

static bool addr_match(const struct mrun_rule *r, const struct sockaddr *sa)
{
	const uint8_t *a;
	unsigned int bits = r->prefix, i;
	uint8_t v4mapped[16];

	if (sa->sa_family == AF_INET6) {
		a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		/* ::ffff:a.b.c.d matches an IPv4 rule. */
		if (r->family == AF_INET && IN6_IS_ADDR_V4MAPPED(
			&((const struct sockaddr_in6 *)sa)->sin6_addr)) {
			memcpy(v4mapped, a + 12, 4);
			a = v4mapped;
		} else if (r->family != AF_INET6) {
			return false;
		}
	} else if (sa->sa_family == AF_INET) {
		if (r->family != AF_INET)
			return false;
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	} else {
		return false;
	}
	for (i = 0; bits >= 8; i++, bits -= 8)
		if (a[i] != r->addr[i])
			return false;
	return !bits || !((a[i] ^ r->addr[i]) & (0xff00 >> bits));
}

int mrun_rules_match(const struct mrun_rule *rules, size_t n,
		     const struct sockaddr *sa, uint16_t port)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (rules[i].has_port &&
		    (port < rules[i].port_lo || port > rules[i].port_hi))
			continue;
		if (rules[i].has_addr && (!sa || !addr_match(&rules[i], sa)))
			continue;
		return rules[i].tag;
	}
	return -1;
}

unsigned int mrun_rules_max_tag(const struct mrun_rule *rules, size_t n)
{
	unsigned int m = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (rules[i].tag > m)
			m = rules[i].tag;
	return m;
}
