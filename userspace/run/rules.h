// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * mercury-run tagging rules, shared by the launcher and the preload shim.
 *
 * MERCURY_RULES is a comma-separated list of rules, tried in order, first
 * match wins. A rule is colon-separated terms, exactly one of them tag=N:
 *   port=P or port=LO-HI   service port: the destination port of connect()
 *                          and sendto(), the local port of accept()
 *   addr=A or addr=A/LEN   peer address, IPv4 or [IPv6] in brackets
 *   default                matches everything (a fixed tag for the job)
 * e.g. "port=5000-5100:tag=3,addr=10.0.0.2:tag=1,default:tag=7".
 */
#ifndef __MERCURY_RUN_RULES_H
#define __MERCURY_RUN_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct mrun_rule {
	uint8_t addr[16];		/* network order, v4 in the first 4 */
	unsigned int tag;
	unsigned int prefix;		/* bits of addr that must match */
	int family;			/* AF_INET, AF_INET6, 0: any */
	uint16_t port_lo, port_hi;	/* inclusive */
	bool has_port;
	bool has_addr;
};

/* 0, or -EINVAL with a message in err. *rules is malloc()ed. */
int mrun_rules_parse(const char *s, struct mrun_rule **rules, size_t *n,
		     char *err, size_t errlen);
/* Tag of the first rule matching peer sa and service port; -1 if none. */
int mrun_rules_match(const struct mrun_rule *rules, size_t n,
		     const struct sockaddr *sa, uint16_t port);
/* Largest tag any rule sets (for the privilege probe). */
unsigned int mrun_rules_max_tag(const struct mrun_rule *rules, size_t n);

#endif /* __MERCURY_RUN_RULES_H */
