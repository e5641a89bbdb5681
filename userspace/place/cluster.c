// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Cluster description:
 *   {"devices": [{"name": "gpu0", "memory_bytes": 8e10, "speed": 1.0}, ...],
 *    "network": {"bandwidth_Bps": 1.25e10, "latency_s": 1e-5},
 *    "links": [{"src": "gpu0", "dst": "gpu1", "bandwidth_Bps": 4.5e11,
 *               "latency_s": 2e-6}]}
 * "speed" defaults to 1.0.  The network is one NIC per device, full duplex
 * at bandwidth_Bps each direction (userspace/common/net.c owns the rule):
 * a device's sends queue on its NIC's egress, its receives on its ingress.
 * A device may name a "host": the devices of one host share its NIC.
 * "links" is optional: each entry gives that pair its own link in both
 * directions, shared with nothing (NVLink inside a host, for example).
 * "network": {"per_pair": true} gives every pair its own link at the
 * network's rate (the model before NICs: a device feeds all its peers at
 * once).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

#include "place.h"
#include "tools.h"

void mp_cluster_free(struct mp_cluster *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->d; i++)
		free(c->dev[i].name);
	free(c->dev);
	free(c->bw);
	free(c->lat);
	mt_net_free(&c->net);
	memset(c, 0, sizeof(*c));
}

/* -ENOENT: absent (callers may default it); -EINVAL: not a finite number. */
static int num(struct json_object *o, const char *key, double *out)
{
	struct json_object *v;

	if (!o || !json_object_object_get_ex(o, key, &v))
		return -ENOENT;
	if (!json_object_is_type(v, json_type_double) &&
	    !json_object_is_type(v, json_type_int))
		return -EINVAL;
	*out = json_object_get_double(v);
	return isfinite(*out) ? 0 : -EINVAL;
}

static void set_uniform(struct mp_cluster *c)
{
	c->uniform = 1;
	/* shared NICs or some dedicated links: devices are not alike */
	for (int i = 0; i < c->d && !c->per_pair; i++) {
		if (c->net.nic[i] != i)
			c->uniform = 0;
		for (int j = 0; j < c->d; j++)
			if (c->net.link_Bps[i * c->d + j] > 0)
				c->uniform = 0;
	}
	for (int i = 0; i < c->d; i++) {
		if (c->dev[i].speed != c->dev[0].speed ||
		    c->dev[i].memory_bytes != c->dev[0].memory_bytes)
			c->uniform = 0;
		for (int j = 0; j < c->d; j++)
			if (i != j && (c->bw[i * c->d + j] != c->bw[c->d > 1] ||
				       c->lat[i * c->d + j] != c->lat[c->d > 1]))
				c->uniform = 0;
	}
}

int mp_cluster_make(struct mp_cluster *c, int d, double mem, double speed,
		    double bw, double lat)
{
	char buf[32];

	memset(c, 0, sizeof(*c));
	if (d <= 0 || !(mem > 0) || !(speed > 0) || !(bw > 0) || !(lat >= 0))
		return -EINVAL;
	c->d = d;
	c->dev = mp_calloc(d, sizeof(*c->dev));
	c->bw = mp_calloc((size_t)d * d, sizeof(double));
	c->lat = mp_calloc((size_t)d * d, sizeof(double));
	for (int i = 0; i < d; i++) {
		snprintf(buf, sizeof(buf), "gpu%d", i);
		c->dev[i].name = mp_strdup(buf);
		c->dev[i].memory_bytes = mem;
		c->dev[i].speed = speed;
	}
	if (mt_net_init(&c->net, d))
		abort();
	for (int i = 0; i < d; i++) {
		c->net.nic_Bps[i] = bw;
		c->net.nic_lat_s[i] = lat;
	}
	mp_cluster_routes(c);
	return 0;
}

/* bw/lat per pair from the rule; uniform from the result. */
void mp_cluster_routes(struct mp_cluster *c)
{
	int d = c->d;

	for (int a = 0; a < d; a++)
		for (int b = 0; b < d; b++) {
			struct mt_route r;

			if (c->per_pair && a != b &&
			    !(c->net.link_Bps[a * d + b] > 0)) {
				c->net.link_Bps[a * d + b] =
					c->net.nic_Bps[c->net.nic[a]];
				c->net.link_lat_s[a * d + b] =
					c->net.nic_lat_s[c->net.nic[a]];
			}
			mt_net_route(&c->net, a, b, &r);
			if (a == b) {	/* never used for a transfer */
				r.Bps = c->net.nic_Bps[c->net.nic[a]];
				r.lat_s = c->net.nic_lat_s[c->net.nic[a]];
			}
			c->bw[a * d + b] = r.Bps;
			c->lat[a * d + b] = r.lat_s;
		}
	set_uniform(c);
}

static int dev_idx(const struct mp_cluster *c, const char *name)
{
	for (int i = 0; name && i < c->d; i++)
		if (!strcmp(c->dev[i].name, name))
			return i;
	return -1;
}

static int parse_obj(struct json_object *root, struct mp_cluster *c,
		     struct mp_err *err)
{
	struct json_object *devs, *net, *links;
	double bw, lat;
	int d, ret;

	if (!json_object_is_type(root, json_type_object))
		return mp_set_err(err, -EINVAL, "cluster: top level is not an object");
	if (!json_object_object_get_ex(root, "devices", &devs) ||
	    !json_object_is_type(devs, json_type_array) ||
	    !(d = json_object_array_length(devs)))
		return mp_set_err(err, -EINVAL,
				  "cluster: \"devices\" must be a non-empty array");
	if (d > MP_MAX_DEV)
		return mp_set_err(err, -EINVAL,
				  "cluster: %d devices, at most %d supported",
				  d, MP_MAX_DEV);
	if (!json_object_object_get_ex(root, "network", &net) ||
	    num(net, "bandwidth_Bps", &bw) || !(bw > 0))
		return mp_set_err(err, -EINVAL,
				  "cluster: network.bandwidth_Bps must be a number > 0");
	ret = num(net, "latency_s", &lat);
	if (ret == -ENOENT)
		lat = 0;
	else if (ret || lat < 0)
		return mp_set_err(err, -EINVAL,
				  "cluster: network.latency_s must be a number >= 0");
	mp_cluster_make(c, d, 1, 1, bw, lat);
	{
		struct json_object *pp;

		if (json_object_object_get_ex(net, "per_pair", &pp)) {
			if (!json_object_is_type(pp, json_type_boolean))
				return mp_set_err(err, -EINVAL,
						  "cluster: network.per_pair must be true or false");
			c->per_pair = json_object_get_boolean(pp);
		}
	}
	for (int i = 0; i < d; i++) {
		struct json_object *o = json_object_array_get_idx(devs, i);
		struct json_object *nv;
		double mem, sp = 1.0;
		const char *name;

		if (!json_object_is_type(o, json_type_object) ||
		    !json_object_object_get_ex(o, "name", &nv) ||
		    !json_object_is_type(nv, json_type_string))
			return mp_set_err(err, -EINVAL,
					  "cluster: devices[%d] needs a \"name\" string",
					  i);
		name = json_object_get_string(nv);
		if (dev_idx(c, name) >= 0 && dev_idx(c, name) < i)
			return mp_set_err(err, -EINVAL,
					  "cluster: device %s listed twice", name);
		if (num(o, "memory_bytes", &mem) || !(mem > 0))
			return mp_set_err(err, -EINVAL,
					  "cluster: device %s: memory_bytes must be a number > 0",
					  name);
		if (num(o, "speed", &sp) == -EINVAL || !(sp > 0))
			return mp_set_err(err, -EINVAL,
					  "cluster: device %s: speed must be a number > 0",
					  name);
		free(c->dev[i].name);
		c->dev[i].name = mp_strdup(name);
		c->dev[i].memory_bytes = mem;
		c->dev[i].speed = sp;
		if (json_object_object_get_ex(o, "host", &nv)) {
			const char *h;

			if (!json_object_is_type(nv, json_type_string))
				return mp_set_err(err, -EINVAL,
						  "cluster: device %s: host must be a string",
						  name);
			/* the NIC of the first device of that host */
			h = json_object_get_string(nv);
			c->net.nic[i] = i;
			for (int k = 0; k < i; k++) {
				struct json_object *ok =
					json_object_array_get_idx(devs, k);
				struct json_object *hk;

				if (json_object_object_get_ex(ok, "host", &hk) &&
				    json_object_is_type(hk, json_type_string) &&
				    !strcmp(json_object_get_string(hk), h)) {
					c->net.nic[i] = c->net.nic[k];
					break;
				}
			}
		}
	}
	if (json_object_object_get_ex(root, "links", &links) && links) {
		if (!json_object_is_type(links, json_type_array))
			return mp_set_err(err, -EINVAL,
					  "cluster: \"links\" must be an array");
		for (size_t i = 0; i < json_object_array_length(links); i++) {
			struct json_object *o = json_object_array_get_idx(links, i);
			struct json_object *sv = NULL, *dv = NULL;
			double lbw, llat = lat;
			int a, b;

			json_object_object_get_ex(o, "src", &sv);
			json_object_object_get_ex(o, "dst", &dv);
			a = dev_idx(c, sv ? json_object_get_string(sv) : NULL);
			b = dev_idx(c, dv ? json_object_get_string(dv) : NULL);
			if (a < 0 || b < 0 || a == b)
				return mp_set_err(err, -EINVAL,
						  "cluster: links[%zu]: src and dst must name two different devices",
						  i);
			if (num(o, "bandwidth_Bps", &lbw) || !(lbw > 0) ||
			    num(o, "latency_s", &llat) == -EINVAL || llat < 0)
				return mp_set_err(err, -EINVAL,
						  "cluster: links[%zu]: bandwidth_Bps > 0 and latency_s >= 0 required",
						  i);
			c->net.link_Bps[a * d + b] = c->net.link_Bps[b * d + a] = lbw;
			c->net.link_lat_s[a * d + b] = llat;
			c->net.link_lat_s[b * d + a] = llat;
		}
	}
	mp_cluster_routes(c);
	return 0;
}

int mp_cluster_parse(const char *text, struct mp_cluster *c,
		     struct mp_err *err)
{
	struct json_object *root = json_tokener_parse(text);
	int ret;

	memset(c, 0, sizeof(*c));
	if (!root)
		return mp_set_err(err, -EINVAL, "cluster: not valid JSON");
	ret = parse_obj(root, c, err);
	json_object_put(root);
	if (ret)
		mp_cluster_free(c);
	return ret;
}

int mp_cluster_load(const char *path, struct mp_cluster *c,
		    struct mp_err *err)
{
	struct json_object *root;
	char msg[MT_ERRLEN];
	int ret;

	memset(c, 0, sizeof(*c));
	ret = mt_read_json(path, &root, msg, sizeof(msg));
	if (ret)
		return mp_set_err(err, ret, "%s", msg);
	ret = parse_obj(root, c, err);
	json_object_put(root);
	if (ret) {
		mp_cluster_free(c);
		if (err) {
			snprintf(msg, sizeof(msg), "%s", err->msg);
			mp_set_err(err, ret, "%s: %s", path, msg);
		}
	}
	return ret;
}

double mp_xfer_ms(const struct mp_cluster *c, int a, int b, double bytes)
{
	if (a == b)
		return 0;
	return 1e3 * (c->lat[a * c->d + b] + bytes / c->bw[a * c->d + b]);
}

double mp_max_speed(const struct mp_cluster *c)
{
	double s = 0;

	for (int i = 0; i < c->d; i++)
		if (c->dev[i].speed > s)
			s = c->dev[i].speed;
	return s;
}
