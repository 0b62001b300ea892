/* Every command answers --help; --version; the preset listing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cli_run.h"

Test(cli_help, every_command_answers_help)
{
    static const char *const cmds[] = { "run", "net", "search", "validate", "calibrate",
                                        "compare", "sweep", "merge", "presets" };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        for (int form = 0; form < 2; form++) {
            char args[128], want[64];
            snprintf(args, sizeof args, "%s %s", cmds[i], form ? "-h" : "--help");
            snprintf(want, sizeof want, "usage: parsim %s", cmds[i]);
            result r;
            run(&r, args);
            cr_expect_eq(r.status, 0, "%s: status %d: %s", args, r.status, r.out);
            cr_expect(strstr(r.out, want), "%s: %s", args, r.out);
        }
    }
}

Test(cli_help, version)
{
    result r;
    run(&r, "--version");
    cr_assert_eq(r.status, 0, "%s", r.out);
    int major = -1, minor = -1, patch = -1;
    cr_expect_eq(sscanf(r.out, "parsim %d.%d.%d", &major, &minor, &patch), 3, "%s", r.out);
}

/* The listing carries each preset's summary, e.g. the NIC of a topology
 * that its file states only in a comment. */
Test(cli_help, presets_list_models_and_topologies)
{
    result r;
    run(&r, "presets");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "models (model.name=NAME"), "%s", r.out);
    cr_expect(strstr(r.out, "topologies (cluster.topology=NAME"), "%s", r.out);
    cr_expect(strstr(r.out, "  llama3-70b "), "%s", r.out);
    cr_expect(strstr(r.out, "one 100 GbE NIC per GPU"), "%s", r.out);
    cr_expect(!strstr(r.out, "; preset llama3-70b."), "the file name is not repeated: %s", r.out);

    run(&r, "presets topologies");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(!strstr(r.out, "llama3-70b"), "%s", r.out);
    cr_expect(strstr(r.out, "4x ConnectX-7 400 Gb/s per tray"), "continuation lines joined: %s", r.out);

    run(&r, "presets gpus");
    expect_refusal(&r, "presets gpus", "'gpus' is neither models nor topologies", NULL);
}
