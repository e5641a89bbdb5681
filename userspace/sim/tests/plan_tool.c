// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The tagger's side of tests/plan.sh, through libmercury's public API:
 *   plan_tool default PROFILE OUT [LEVELS]
 *                                   write libmercury's default plan
 *                                   (squeezed to LEVELS tags if given)
 *   plan_tool lookup PLAN [LEVELS]  for each tensor name on stdin print
 *                                   "name<TAB>tag" (mercury_plan_lookup);
 *                                   with LEVELS, the wire tag of the plan
 *                                   loaded for LEVELS levels, squeezed if
 *                                   wider (mercury_plan_wire_tag)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mercury/mercury.h>

int main(int argc, char **argv)
{
	MERCURY_OPTS(mercury_plan_load_opts, lo, .squeeze = true,
		     .levels = argc == 4 ? atoi(argv[3]) : 0);
	struct mercury_plan *p;
	char line[4096];
	int tag;

	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "default")) {
		MERCURY_OPTS(mercury_plan_opts, o,
			     .levels = argc == 5 ? atoi(argv[4]) : 0);

		if (mercury_plan_from_profile(argv[2], &o, &p) ||
		    mercury_plan_save(p, argv[3])) {
			fprintf(stderr, "plan_tool: %s\n", mercury_last_error());
			return 1;
		}
		mercury_plan_free(p);
		return 0;
	}
	if ((argc != 3 && argc != 4) || strcmp(argv[1], "lookup")) {
		fprintf(stderr, "usage: plan_tool default PROFILE OUT [LEVELS] | lookup PLAN [LEVELS]\n");
		return 2;
	}
	if (mercury_plan_load_opts(argv[2], argc == 4 ? &lo : NULL, &p)) {
		fprintf(stderr, "plan_tool: %s\n", mercury_last_error());
		return 1;
	}
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		tag = argc == 4 ? mercury_plan_wire_tag(p, line, NULL) :
			mercury_plan_lookup(p, line);
		if (tag < 0) {
			fprintf(stderr, "plan_tool: %s not in %s\n", line, argv[2]);
			mercury_plan_free(p);
			return 1;
		}
		printf("%s\t%d\n", line, tag);
	}
	mercury_plan_free(p);
	return 0;
}
