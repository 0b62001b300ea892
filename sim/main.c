/* parsim command line: dispatch only.  Each command lives in
 * sim/cmd_<name>.c (see cli.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "cli.h"
#include "config.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *synopsis;
    bool own_help; /* the command prints a longer --help itself */
} command;

static const command commands[] = {
    {"run", cmd_run,
     "run [CONFIG.cfg|run_config.yaml] [KEY=VALUE ...] [--format text|json|csv] [--trace FILE.json] [--layout]\n"
     "         [--dump-config] [--explain-config]\n"
     "      simulate one training step and report time, throughput, MFU, bubble, communication, memory\n"
     "      (a .yaml/.yml config is a Megatron Bridge saved config; --explain-config lists its fields)", false},
    {"net", cmd_net,
     "net COLLECTIVE [CONFIG.cfg] [KEY=VALUE ...] [--min-bytes N] [--max-bytes N] [--factor F]\n"
     "         [--algo A] [--proto P] [--type T]\n"
     "      print what nccl-tests prints for the modeled fabric (COLLECTIVE: all_reduce, all_gather,\n"
     "      reduce_scatter, all_to_all, broadcast, p2p); sizes in bytes, binary: 1M = 1,048,576 bytes", false},
    {"search", cmd_search,
     "search [CONFIG.cfg] [KEY=VALUE ...] [--top N] [--jobs N] [--out FILE.csv] [--rank time|tokens|cost]\n"
     "         [--token-budget N] [--gpus N|MIN:MAX] [--pareto] [--exhaustive] [--fsdp] [--ep-overlap]\n"
     "         [--schedules NAME,...|all] [--emit-overrides] [--emit-sbatch FILE] [--recipe NAME]\n"
     "      rank every legal layout that fits in memory; compare with the rules of thumb\n"
     "      (--token-budget counts tokens, decimal: 2T = 2e12 tokens)", true},
    {"validate", cmd_validate,
     "validate FILE.csv [--out FILE.csv] [--rows FILTER] [--jobs N] [--recipes FILE|none] [--frameworks FILE] [KEY=VALUE ...]\n"
     "      predict published measurements (bench/validation/public.csv) and report the error\n"
     "      (--recipes: each run's recipe settings, default recipes.csv beside FILE.csv;\n"
     "      --frameworks: framework defaults, default bench/validation/frameworks.csv)", false},
    {"calibrate", cmd_calibrate,
     "calibrate FILE.csv [--out PARAMS.cfg] [--out-halves PREFIX] [--params KEYS] [--rows FILTER] [--train-half even|odd] [--loss absolute|squared] [--jobs N] [--max-iter N] [--recipes FILE|none] [--frameworks FILE] [--quiet]\n"
     "  parsim calibrate --nccl-tests LOG [--out PARAMS.cfg] [--params KEYS] [--op NAME] [--quiet] KEY=VALUE ...\n"
     "      fit cost-model parameters to measured rows or nccl-tests output (sim.params=PARAMS.cfg);\n"
     "      rows run as validate runs them (--recipes and --frameworks as there)", false},
    {"compare", cmd_compare,
     "compare OLD.csv NEW.csv [--fail-above PCT] [--key COLS] [--list N]\n"
     "      line up two outputs of validate, sweep or search and report what moved", false},
    {"sweep", cmd_sweep,
     "sweep SWEEP.cfg [--jobs N] [--shard K/N] [--out FILE.csv]\n"
     "      run every configuration of a sweep spec, one CSV row each (resumes --out)", false},
    {"merge", cmd_merge,
     "merge OUT.csv SHARD.csv ...\n"
     "      join the outputs of sweep --shard K/N into the unsharded sweep's CSV", false},
    {"presets", cmd_presets,
     "presets [models|topologies]\n"
     "      list the model and topology presets (model.name=, cluster.topology=) with what each assumes", false},
};

static const char keys_note[] =
    "Keys use Megatron Bridge names, e.g. model.tensor_model_parallel_size=4;\n"
          "model.name loads models/<name>.cfg, cluster.topology loads topologies/<name>.cfg.\n"
    "Exit status: 0 success, 1 simulation or I/O failure, 2 bad input.\n";

static void usage(FILE *out)
{
    fputs("usage: parsim COMMAND [ARGS]\n\ncommands:\n", out);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  parsim %s\n", commands[i].synopsis);
    fputs("  parsim --help-config\n"
          "      list every config key with its type, default and range\n"
          "  parsim --version\n\n",
          out);
    fputs(keys_note, out);
}

/* `parsim COMMAND --help` (or -h) anywhere among its arguments. */
static bool asks_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    /* GSL reports through return codes, never by aborting. */
    gsl_set_error_handler_off();
    if (argc < 2) {
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return EXIT_SUCCESS;
    }
    if (!strcmp(cmd, "--version")) {
        printf("parsim %s\n", PARSIM_VERSION);
        return EXIT_SUCCESS;
    }
    if (!strcmp(cmd, "--help-config")) {
        cfg_print_keys(stdout);
        return EXIT_SUCCESS;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) {
            if (!commands[i].own_help && asks_help(argc - 2, argv + 2)) {
                printf("usage: parsim %s\n\n%s", commands[i].synopsis, keys_note);
                return EXIT_SUCCESS;
            }
            return commands[i].fn(argc - 2, argv + 2);
        }
    return cli_usage_error("unknown command '%s'", cmd);
}
