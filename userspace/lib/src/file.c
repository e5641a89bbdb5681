// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Output files, whole or not at all: every file libmercury and the tools
 * write (plans, profiles, tables, plots) is written beside its target and
 * renamed over it once complete, so a failed write (a full disk, a file
 * size limit, a killed process) leaves the previous file as it was and no
 * partial one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static mode_t current_umask(void)
{
	mode_t m = umask(022);

	umask(m);
	return m;
}

static void out_free(struct mercury_out *o)
{
	free(o->tmp);
	free(o->path);
	memset(o, 0, sizeof(*o));
	o->fd = -1;
}

int mercury_out_open(struct mercury_out *o, const char *path)
{
	struct stat st;
	const char *base;
	size_t dlen;
	int err;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	if (!path || !*path)
		return mercury_err(EINVAL, "empty output file name");
	o->mode = 0666 & ~current_umask();
	/* through a symlink to what it points to: the link stays */
	o->path = realpath(path, NULL);
	if (!o->path && errno != ENOENT)
		return mercury_err(errno, "%s: %s", path, strerror(errno));
	if (!o->path)
		o->path = strdup(path);
	if (!o->path)
		return mercury_err(ENOMEM, "out of memory");
	if (!stat(o->path, &st)) {
		if (S_ISDIR(st.st_mode)) {
			out_free(o);
			return mercury_err(EISDIR, "%s: is a directory", path);
		}
		/*
		 * A terminal, /dev/null or a FIFO holds nothing to lose and
		 * cannot be renamed over: written as it is.
		 */
		if (!S_ISREG(st.st_mode)) {
			o->fd = open(o->path, O_WRONLY | O_CLOEXEC);
			if (o->fd < 0) {
				err = errno;
				out_free(o);
				return mercury_err(err, "%s: %s", path,
						   strerror(err));
			}
			return 0;
		}
		o->mode = st.st_mode & 07777;
	}
	/*
	 * ".NAME.XXXXXX" in the target's directory: rename() needs both on
	 * one file system, and a dot file is not mistaken for output.
	 */
	base = strrchr(o->path, '/');
	base = base ? base + 1 : o->path;
	dlen = base - o->path;
	o->tmp = malloc(strlen(o->path) + 9);
	if (!o->tmp) {
		out_free(o);
		return mercury_err(ENOMEM, "out of memory");
	}
	sprintf(o->tmp, "%.*s.%s.XXXXXX", (int)dlen, o->path, base);
	o->fd = mkostemp(o->tmp, O_CLOEXEC);
	if (o->fd < 0) {
		err = errno;
		out_free(o);
		return mercury_err(err, "%s: cannot write: %s", path,
				   strerror(err));
	}
	return 0;
}

void mercury_out_abort(struct mercury_out *o)
{
	if (o->fd >= 0)
		close(o->fd);
	if (o->tmp)
		unlink(o->tmp);
	out_free(o);
}

int mercury_out_commit(struct mercury_out *o)
{
	int err = 0;

	/* on disk before it replaces the old file, or a crash loses both */
	if (o->tmp && (fchmod(o->fd, o->mode) || fsync(o->fd)))
		err = errno;
	if (close(o->fd) && !err)
		err = errno;
	o->fd = -1;
	if (!err && o->tmp && rename(o->tmp, o->path))
		err = errno;
	if (!err) {
		free(o->tmp);
		o->tmp = NULL;
	} else {
		mercury_err(err, "%s: cannot write: %s", o->path,
			    strerror(err));
	}
	mercury_out_abort(o);
	return err ? -err : 0;
}

int mercury_write_file(const char *path, const char *buf, size_t len)
{
	struct mercury_out o;
	ssize_t n;
	int err;

	err = mercury_out_open(&o, path);
	if (err)
		return err;
	while (len) {
		n = write(o.fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? errno : EIO;
			mercury_out_abort(&o);
			return mercury_err(err, "%s: cannot write: %s", path,
					   strerror(err));
		}
		buf += n;
		len -= n;
	}
	return mercury_out_commit(&o);
}
