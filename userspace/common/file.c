// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Input and output files of the tools. Inputs go through libmercury's
 * bounded reader and JSON parser (the ones its profile and plan loaders
 * use), linked from its static archive as bpftool links libbpf's
 * internals; outputs through its writer, whole or not at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json.h>

#include "../lib/src/internal.h"
#include "tools.h"

int mt_set_err(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

int mt_read_file(const char *path, char **buf, size_t *len, char *err,
		 size_t errlen)
{
	struct stat st;
	int ret;

	/*
	 * A directory or a device never holds a profile, plan or cluster:
	 * say so at once instead of reading /dev/zero up to the bound or
	 * waiting on a terminal. A pipe is read (process substitution).
	 */
	if (stat(path, &st))
		return mt_set_err(err, errlen, -errno, "%s: %s", path,
				  strerror(errno));
	if (S_ISDIR(st.st_mode))
		return mt_set_err(err, errlen, -EISDIR, "%s: is a directory",
				  path);
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
		return mt_set_err(err, errlen, -EINVAL,
				  "%s: not a regular file", path);
	ret = mercury_read_file(path, buf, len);
	if (ret)
		return mt_set_err(err, errlen, ret, "%s", mercury_last_error());
	return 0;
}

int mt_read_json(const char *path, struct json_object **out, char *err,
		 size_t errlen)
{
	size_t len;
	char *buf;
	int ret;

	ret = mt_read_file(path, &buf, &len, err, errlen);
	if (ret)
		return ret;
	if (!len)
		ret = mt_set_err(err, errlen, -EINVAL, "%s: empty file", path);
	else if (mercury_parse_json(path, buf, len, out))
		ret = mt_set_err(err, errlen, -EINVAL, "%s",
				 mercury_last_error());
	free(buf);
	return ret;
}

int mt_write_file(const char *path, const void *buf, size_t len, char *err,
		  size_t errlen)
{
	int ret = mercury_write_file(path, buf, len);

	if (ret)
		mt_set_err(err, errlen, ret, "%s", mercury_last_error());
	return ret;
}
