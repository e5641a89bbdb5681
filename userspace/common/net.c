// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The network rule of the tools (tools.h, "network"): one owner for how
 * mercury-place's list scheduler, its pipeline model and mercury-sim
 * charge a transfer.
 *
 * Every device sits behind one NIC: its own, or its host's when the
 * cluster groups devices into hosts.  A NIC is full duplex: its egress
 * sends one transfer at a time and its ingress receives one at a time,
 * each at the NIC's rate, independently of each other.  A transfer from a
 * to b therefore holds a's egress and b's ingress together, for latency +
 * bytes / the slower of the two rates.  Only a pair the cluster declares
 * as a link (NVLink inside a host, or every pair when the cluster asks for
 * per-pair links) bypasses the NICs: it has its own link each direction.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

int mt_net_init(struct mt_net *n, int ndev)
{
	memset(n, 0, sizeof(*n));
	if (ndev < 1)
		return -EINVAL;
	n->ndev = ndev;
	n->nnic = ndev;
	n->nic = calloc(ndev, sizeof(int));
	n->nic_Bps = calloc(ndev, sizeof(double));
	n->nic_lat_s = calloc(ndev, sizeof(double));
	n->link_Bps = calloc((size_t)ndev * ndev, sizeof(double));
	n->link_lat_s = calloc((size_t)ndev * ndev, sizeof(double));
	if (!n->nic || !n->nic_Bps || !n->nic_lat_s || !n->link_Bps ||
	    !n->link_lat_s) {
		mt_net_free(n);
		return -ENOMEM;
	}
	for (int i = 0; i < ndev; i++)
		n->nic[i] = i;
	return 0;
}

void mt_net_free(struct mt_net *n)
{
	free(n->nic);
	free(n->nic_Bps);
	free(n->nic_lat_s);
	free(n->link_Bps);
	free(n->link_lat_s);
	memset(n, 0, sizeof(*n));
}

int mt_net_route(const struct mt_net *n, int a, int b, struct mt_route *r)
{
	double la, lb;

	memset(r, 0, sizeof(*r));
	r->egress = r->ingress = -1;
	if (a < 0 || b < 0 || a >= n->ndev || b >= n->ndev)
		return -EINVAL;
	if (a == b)
		return 0;	/* on the device: nothing crosses */
	if (n->link_Bps[(size_t)a * n->ndev + b] > 0) {
		r->kind = MT_ROUTE_LINK;
		r->Bps = n->link_Bps[(size_t)a * n->ndev + b];
		r->lat_s = n->link_lat_s[(size_t)a * n->ndev + b];
		return 0;
	}
	r->kind = MT_ROUTE_NIC;
	r->egress = n->nic[a];
	r->ingress = n->nic[b];
	la = n->nic_Bps[r->egress];
	lb = n->nic_Bps[r->ingress];
	r->Bps = la < lb ? la : lb;
	r->lat_s = n->nic_lat_s[r->egress] > n->nic_lat_s[r->ingress] ?
		   n->nic_lat_s[r->egress] : n->nic_lat_s[r->ingress];
	return 0;
}

double mt_net_spread_Bps(double nic_Bps, double senders, double receivers)
{
	/* each receiver's ingress takes senders/receivers flows at once */
	if (!(senders > 0) || !(receivers > 0))
		return 0;
	return receivers < senders ? nic_Bps * (receivers / senders) : nic_Bps;
}
