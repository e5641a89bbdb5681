/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels sch_mercury builds against, probed by
 * feature, never by version number. Force-included by Kbuild.
 */
#ifndef _MERCURY_COMPAT_H
#define _MERCURY_COMPAT_H

#include <linux/module.h>

/* Kernels before 6.9 request "sch_<kind>", which the file name answers. */
#ifndef MODULE_ALIAS_NET_SCH
#define MODULE_ALIAS_NET_SCH(id)	MODULE_ALIAS("net-sch-" id)
#endif

#endif /* _MERCURY_COMPAT_H */
