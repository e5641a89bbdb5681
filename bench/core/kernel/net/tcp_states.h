/* SPDX-License-Identifier: GPL-2.0 */
/* Stub: the kernel API kmod/sch_mercury.c uses is in ../../shim.h. */
#include "../../shim.h"
