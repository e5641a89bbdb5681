// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * PNG plots through gnuplot, with nothing from data in any command.
 *
 * gnuplot runs without a shell as "gnuplot -c SCRIPT DATA ARG2...": the
 * script is the caller's constant text, the rows are a file in a private
 * directory (mkdtemp), and strings such as a model name reach the script
 * only as the values ARG2.., which gnuplot never parses as commands. The
 * script sets no output: the PNG arrives on gnuplot's standard output,
 * which is libmercury's output file (struct mercury_out) beside the
 * target, renamed into place only when gnuplot exits 0 with a PNG written. gnuplot's standard input is
 * /dev/null and its messages go to a file we read afterwards: no pipe
 * connects us, so a gnuplot that is missing, dies or closes its input
 * cannot raise SIGPIPE in the tool.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/src/internal.h"
#include "tools.h"

#define MT_PLOT_MAXARGS 8

extern char **environ;

static const unsigned char png_magic[8] = {
	0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'
};

void mt_plot_label(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = *s;

		fputc(c <= ' ' || c == '"' || c == '\'' || c == '#' ||
		      c == '\\' || c == 0x7f ? '_' : c, f);
	}
	fputc('"', f);
}

static int put_file(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ssize_t n;
	int ret = 0;

	if (fd < 0)
		return -errno;
	while (len && !ret) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		buf += n;
		len -= n;
	}
	if (close(fd) && !ret)
		ret = -errno;
	return ret;
}

/* gnuplot's last message (its error comes last), for the one-line error. */
static void last_line(const char *path, char *line, size_t len)
{
	char buf[256], *s, *nl;
	FILE *f = fopen(path, "r");

	line[0] = '\0';
	if (!f)
		return;
	while (fgets(buf, sizeof(buf), f)) {
		s = buf + strspn(buf, " \t");
		nl = strchr(s, '\n');
		if (nl)
			*nl = '\0';
		if (*s)
			snprintf(line, len, "%s", s);
	}
	fclose(f);
}

static int has_png(int fd)
{
	unsigned char head[sizeof(png_magic)];

	return pread(fd, head, sizeof(head), 0) == sizeof(head) &&
	       !memcmp(head, png_magic, sizeof(head));
}

int mt_plot_png(const struct mt_plot *p, char *err, size_t errlen)
{
	char dir[] = "/tmp/mercury-plot.XXXXXX";
	char script[64], data[64], msgs[64], line[256];
	const char *argv[4 + MT_PLOT_MAXARGS + 1];
	posix_spawn_file_actions_t fa;
	int ret, argc = 0, status;
	struct mercury_out out;
	pid_t pid;

	/*
	 * Always /tmp, not $TMPDIR: the data file's name is what the script
	 * plots, and a name beginning with '<' would be run as a command.
	 */
	if (!mkdtemp(dir)) {
		ret = -errno;
		snprintf(err, errlen, "cannot create a temporary directory: %s",
			 strerror(errno));
		return ret;
	}
	snprintf(script, sizeof(script), "%s/plot.gp", dir);
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(msgs, sizeof(msgs), "%s/messages", dir);
	ret = put_file(script, p->script, strlen(p->script));
	if (!ret)
		ret = put_file(data, p->data, p->len);
	if (ret) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-ret));
		goto out_dir;
	}
	ret = mercury_out_open(&out, p->out);
	if (ret) {
		snprintf(err, errlen, "%s", mercury_last_error());
		goto out_dir;
	}

	argv[argc++] = "gnuplot";
	argv[argc++] = "-c";
	argv[argc++] = script;
	argv[argc++] = data;
	for (int i = 0; p->args && p->args[i] && i < MT_PLOT_MAXARGS; i++)
		argv[argc++] = p->args[i];
	argv[argc] = NULL;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out.fd, 1);
	posix_spawn_file_actions_addopen(&fa, 2, msgs,
					 O_WRONLY | O_CREAT | O_TRUNC, 0600);
	/* our buffered output must not be written twice or late */
	fflush(NULL);
	ret = posix_spawnp(&pid, "gnuplot", &fa, NULL, (char *const *)argv,
			   environ);
	posix_spawn_file_actions_destroy(&fa);
	if (ret == ENOENT) {
		snprintf(err, errlen,
			 "gnuplot not found (apt-get install gnuplot-nox)");
		ret = -ENOENT;
		goto out_abort;
	}
	if (ret) {
		snprintf(err, errlen, "cannot run gnuplot: %s", strerror(ret));
		ret = -ret;
		goto out_abort;
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			snprintf(err, errlen, "gnuplot: %s", strerror(errno));
			goto out_abort;
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		last_line(msgs, line, sizeof(line));
		if (WIFSIGNALED(status))
			snprintf(err, errlen, "gnuplot killed by signal %d, no PNG",
				 WTERMSIG(status));
		else if (line[0])
			snprintf(err, errlen, "gnuplot failed, no PNG: %s", line);
		else
			snprintf(err, errlen, "gnuplot failed (exit %d), no PNG",
				 WEXITSTATUS(status));
		ret = -EIO;
		goto out_abort;
	}
	if (out.tmp && !has_png(out.fd)) {
		snprintf(err, errlen,
			 "gnuplot wrote no PNG (has it the pngcairo terminal?)");
		ret = -EIO;
		goto out_abort;
	}
	ret = mercury_out_commit(&out);
	if (ret)
		snprintf(err, errlen, "%s", mercury_last_error());
	goto out_dir;
out_abort:
	mercury_out_abort(&out);
out_dir:
	unlink(script);
	unlink(data);
	unlink(msgs);
	rmdir(dir);
	return ret;
}
