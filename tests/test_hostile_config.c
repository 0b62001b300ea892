/* Hostile and careless numbers, names and files given to the config and to
 * the options of search and net: each ends with status 2 and one line
 * naming where it came from (file:line or "command line"), the key or
 * option, and the rule (a key's range, a limit), quickly and without a
 * signal. */
/* popen, mkdtemp, setenv; nftw (scratch dir cleanup) is an XSI function */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include <criterion/criterion.h>

#include "cli_run.h"
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUN "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=64 "
#define SEARCH "search model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=64 "
#define NET "net all_reduce cluster.topology=dgx-h100 cluster.num_gpus=16 "

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/parsim-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_dir(void)
{
    if (dir[0])
        nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(hostile_config, .init = make_dir, .fini = remove_dir, .timeout = 30);

/* dir/name with text in it; returns the path (static buffer per call site
 * is enough: tests use one at a time). */
static const char *write_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Runs parsim with args; the status and one line of output containing
 * every needle. */
static void expect(const char *args, int status, const char *const *needles)
{
    result r;
    run(&r, args);
    cr_expect_eq(r.status, status, "`%s` exited %d, expected %d: %s", args, r.status, status, r.out);
    if (status != 0) {
        const char *nl = strchr(r.out, '\n');
        cr_expect(nl && nl[1] == '\0', "`%s`: expected one line: %s", args, r.out);
        cr_expect(strncmp(r.out, "parsim: ", 8) == 0, "`%s`: %s", args, r.out);
    }
    for (const char *const *n = needles; *n; n++)
        cr_expect(strstr(r.out, *n) != NULL, "`%s`: no \"%s\" in: %s", args, *n, r.out);
}

#define EXPECT(args, status, ...) expect(args, status, (const char *const[]){ __VA_ARGS__, NULL })

Test(hostile_config, float_beyond_its_range_as_override)
{
    /* finite, but 1e308 GB is inf bytes */
    EXPECT(RUN "cluster.gpu.hbm_gbytes=1e308", 2,
           "command line: cluster.gpu.hbm_gbytes: must be in (0, 100000] (got 1e+308)");
    /* not a finite number at all */
    EXPECT(RUN "cluster.gpu.hbm_gbytes=1e400", 2,
           "command line: cluster.gpu.hbm_gbytes: expected a number in (0, 100000]", "1e400");
    EXPECT(RUN "cluster.nvlink.bw_gbytes_per_s=1e7", 2,
           "command line: cluster.nvlink.bw_gbytes_per_s: must be in (0, 1000000]");
    EXPECT(RUN "cluster.compute.kernel_overhead_us=2e6", 2,
           "command line: cluster.compute.kernel_overhead_us: must be in [0, 1000000]");
    EXPECT(RUN "cluster.scaleout.spine_oversubscription=1e4", 2,
           "command line: cluster.scaleout.spine_oversubscription: must be in [1, 1000]");
    EXPECT(RUN "cluster.nccl.ring_bw_factor=[0.5,1e400,1]", 2,
           "command line: cluster.nccl.ring_bw_factor: expected a list of numbers in (0, 1]");
    EXPECT(RUN "cluster.nccl.base_latency_us.ring=[1,2,1e300]", 2,
           "command line: cluster.nccl.base_latency_us.ring: element 2 must be in [0, 1000000]");
}

Test(hostile_config, inf_from_a_file_names_file_and_line)
{
    /* libconfig reads 1e400 as inf: the same range check refuses it */
    const char *path = write_file("inf.cfg", "model: { name = \"llama3-8b\"; };\n"
                                             "train: { global_batch_size = 64; };\n"
                                             "cluster: {\n"
                                             "  topology = \"dgx-h100\";\n"
                                             "  num_gpus = 8;\n"
                                             "  gpu: { hbm_gbytes = 1e400; };\n"
                                             "};\n");
    char args[512], where[300];
    snprintf(args, sizeof args, "run '%s'", path);
    snprintf(where, sizeof where, "%s:6: cluster.gpu.hbm_gbytes: must be in (0, 100000] (got inf)", path);
    EXPECT(args, 2, where);

    path = write_file("inf-list.cfg", "cluster: { topology = \"dgx-h100\"; num_gpus = 16;\n"
                                      "  nccl: { ring_bw_factor = [0.5, 1e400, 1.0]; }; };\n");
    snprintf(args, sizeof args, "net all_reduce '%s'", path);
    snprintf(where, sizeof where, "%s:2: cluster.nccl.ring_bw_factor: element 1 must be in (0, 1] (got inf)",
             path);
    EXPECT(args, 2, where);
}

Test(hostile_config, integers_beyond_their_range)
{
    /* each of these once overflowed a product, an assert or a division */
    EXPECT(RUN "cluster.gpus_per_node=9223372036854775807", 2,
           "command line: cluster.gpus_per_node: must be in [1, 262144] (got 9223372036854775807)");
    EXPECT(RUN "model.make_vocab_size_divisible_by=4611686018427387904", 2,
           "command line: model.make_vocab_size_divisible_by: must be in [1, 65536]");
    EXPECT(RUN "cluster.num_gpus=2147483648", 2, "command line: cluster.num_gpus: must be in [1, 262144]");
    /* beyond int64: a float, refused with the range */
    EXPECT(RUN "cluster.num_gpus=9223372036854775808", 2,
           "command line: cluster.num_gpus: expected an integer in [1, 262144], got a float");
    static const struct {
        const char *kv, *says;
    } one_past[] = {
        { "model.num_layers=1025", "model.num_layers: must be in [1, 1024]" },
        { "model.hidden_size=1048577", "model.hidden_size: must be in [1, 1048576]" },
        { "model.ffn_hidden_size=1048577", "model.ffn_hidden_size: must be in [0, 1048576]" },
        { "model.num_attention_heads=65537", "model.num_attention_heads: must be in [1, 65536]" },
        { "model.vocab_size=16777217", "model.vocab_size: must be in [1, 16777216]" },
        { "model.seq_length=16777217", "model.seq_length: must be in [1, 16777216]" },
        { "model.num_moe_experts=65537", "model.num_moe_experts: must be in [0, 65536]" },
        { "model.tensor_model_parallel_size=262145", "model.tensor_model_parallel_size: must be in [1, 262144]" },
        { "model.virtual_pipeline_model_parallel_size=1025",
          "model.virtual_pipeline_model_parallel_size: must be in [0, 1024]" },
        { "train.global_batch_size=1048577", "train.global_batch_size: must be in [1, 1048576]" },
        { "train.micro_batch_size=1048577", "train.micro_batch_size: must be in [1, 1048576]" },
        { "model.moe_layer_freq=1025", "model.moe_layer_freq: must be in [1, 1024]" },
        { "model.window_size=[16777217,0]", "model.window_size: element 0 must be in [0, 16777216]" },
        { "model.hierarchical_context_parallel_sizes=[2,262145]",
          "model.hierarchical_context_parallel_sizes: element 1 must be in [1, 262144]" },
        { "cluster.nvlink.efficiency_size_kib=[1,2147483648]",
          "cluster.nvlink.efficiency_size_kib: element 1 must be in [1, 1073741824]" },
        { "ddp.bucket_size=1125899906842625", "ddp.bucket_size: must be in [0, 1125899906842624]" },
    };
    char args[512], says[256];
    for (size_t i = 0; i < sizeof one_past / sizeof one_past[0]; i++) {
        snprintf(args, sizeof args, RUN "%s", one_past[i].kv);
        snprintf(says, sizeof says, "command line: %s", one_past[i].says);
        EXPECT(args, 2, says);
    }
}

/* --help-config lists a range for every numeric key (sim.seed: any).
 * Columns: key (45), type (10), default (14), range (21), meaning. */
Test(hostile_config, help_config_shows_every_range)
{
    result r;
    run(&r, "--help-config");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "(0, 100000]") != NULL, "no HBM range: %s", r.out);
    int numeric = 0;
    char *save = NULL;
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char key[64], type[16], range[32];
        if (strlen(line) < 94 || sscanf(line, "%63s", key) != 1)
            continue;
        snprintf(type, sizeof type, "%.10s", line + 46);
        snprintf(range, sizeof range, "%.21s", line + 72);
        bool num = !strncmp(type, "int ", 4) || !strncmp(type, "float", 5) || !strncmp(type, "int|list", 8) ||
                   !strncmp(type, "int list", 8);
        if (!num)
            continue;
        numeric++;
        if (!strcmp(key, "sim.seed"))
            cr_expect(strncmp(range, "any", 3) == 0, "%s", line);
        else
            cr_expect(range[0] == '[' || range[0] == '(', "no range for %s: %s", key, line);
    }
    cr_expect_gt(numeric, 60, "only %d numeric keys listed", numeric);
}

Test(hostile_config, preset_names_are_not_paths)
{
    EXPECT(RUN "model.name=../../../../etc/passwd", 2,
           "command line: model.name: \"../../../../etc/passwd\" is not a model preset name",
           "letters, digits");
    EXPECT(RUN "model.name=../models/llama3-8b", 2, "model.name: \"../models/llama3-8b\" is not a model preset name");
    EXPECT(RUN "cluster.topology=/etc/passwd", 2,
           "cluster.topology: \"/etc/passwd\" is not a topology preset name");
    EXPECT(RUN "model.name=.llama3-8b", 2, "model.name: \".llama3-8b\" is not a model preset name");
    /* a plain name that is not there is still "unknown", with the list */
    EXPECT(RUN "model.name=llama3_8b", 2, "model.name: unknown model preset \"llama3_8b\"", "did you mean");
    /* a file of one's own is the config file argument: paths work there */
    write_file("mine.cfg", "model: { name = \"llama3-8b\"; };\n"
                                              "train: { global_batch_size = 64; };\n"
                                              "cluster: { topology = \"dgx-h100\"; num_gpus = 8; };\n");
    char args[512];
    snprintf(args, sizeof args, "run '%s/../%s/mine.cfg'", dir, strrchr(dir, '/') + 1);
    EXPECT(args, 0, "llama3-8b on 8");
}

Test(hostile_config, config_files_must_be_regular)
{
    char fifo[128], args[600], says[600];
    snprintf(fifo, sizeof fifo, "%s/pipe.cfg", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);

    snprintf(args, sizeof args, "run '%s'", fifo);
    snprintf(says, sizeof says, "%s: is a FIFO: a config file must be a regular file", fifo);
    EXPECT(args, 2, says);

    snprintf(args, sizeof args, "run '%s'", dir);
    snprintf(says, sizeof says, "%s: is a directory: a config file must be a regular file", dir);
    EXPECT(args, 2, says);

    snprintf(args, sizeof args, RUN "sim.params='%s'", fifo);
    snprintf(says, sizeof says, "command line: sim.params: %s: is a FIFO", fifo);
    EXPECT(args, 2, says);

    snprintf(args, sizeof args, RUN "cluster.compute.microbench='%s'", fifo);
    snprintf(says, sizeof says, "cluster.compute.microbench: %s: is a FIFO", fifo);
    EXPECT(args, 2, says);

    /* libconfig would open an included FIFO itself, and wait */
    const char *top = write_file("top.cfg", "train: { global_batch_size = 64; };\n@include \"pipe.cfg\"\n");
    snprintf(args, sizeof args, "run '%s'", top);
    snprintf(says, sizeof says, "%s:2: @include \"pipe.cfg\": %s: is a FIFO", top, fifo);
    EXPECT(args, 2, says);
    /* a file including itself stops at libconfig's nesting limit, fast */
    const char *self = write_file("self.cfg", "@include \"self.cfg\"\n@include \"self.cfg\"\n");
    snprintf(args, sizeof args, "run '%s'", self);
    EXPECT(args, 2, "@include \"self.cfg\": includes nested more than 10 deep");

    /* a preset that is a FIFO in a data dir */
    char models[128], topo[128], preset[160];
    snprintf(models, sizeof models, "%s/models", dir);
    snprintf(topo, sizeof topo, "%s/topologies", dir);
    cr_assert_eq(mkdir(models, 0700), 0);
    cr_assert_eq(mkdir(topo, 0700), 0);
    snprintf(preset, sizeof preset, "%s/stuck.cfg", models);
    cr_assert_eq(mkfifo(preset, 0600), 0);
    setenv("PARSIM_DATA_DIR", dir, 1);
    snprintf(says, sizeof says, "command line: model.name: %s: is a FIFO", preset);
    EXPECT("run model.name=stuck", 2, says);
    unsetenv("PARSIM_DATA_DIR");
}

/* Paths stay paths where a key names a file of the user's own. */
Test(hostile_config, user_files_keep_their_paths)
{
    const char *path = write_file("params.cfg", "cluster: { compute: { sustained_fraction = 0.5; }; };\n");
    char args[512];
    snprintf(args, sizeof args, RUN "sim.params='%s' --dump-config", path);
    EXPECT(args, 0, "cluster.compute.sustained_fraction = 0.5;");
}

Test(hostile_config, search_options_are_bounded)
{
    EXPECT(SEARCH "--gpus 9223372036854775807", 2, "--gpus needs a whole number in 1..262144");
    EXPECT(SEARCH "--gpus 4611686018427387904:9223372036854775807", 2, "--gpus needs a whole number in 1..262144");
    EXPECT(SEARCH "--gpus 8:9223372036854775807", 2, "--gpus needs a whole number in 1..262144",
           "'9223372036854775807'");
    EXPECT(SEARCH "--gpus 16:8", 2, "--gpus MIN:MAX: MIN (16) is above MAX (8)");
    EXPECT(SEARCH "--gpus 0", 2, "--gpus needs a whole number in 1..262144");
    EXPECT(SEARCH "--rank cost --token-budget 1e400", 2, "--token-budget needs a number of tokens in 1..1e+18",
           "decimal: 2T = 2e12");
    EXPECT(SEARCH "--rank cost --token-budget 1e19", 2, "--token-budget needs a number of tokens");
    EXPECT(SEARCH "--top 1e3", 2, "--top needs a whole number in 1..1000000");
    EXPECT(SEARCH "--jobs 4097", 2, "--jobs needs a whole number in 0..4096");
    /* decimal multiples for a count of tokens */
    EXPECT(SEARCH "--rank cost --token-budget 2T --top 1", 0, "token budget 2e+12");
}

Test(hostile_config, net_sizes_and_rows_are_bounded)
{
    EXPECT(NET "--factor 1.0000001", 2, "--factor 1.0000001", "--min-bytes 8", "--max-bytes 8589934592",
           "more than 4096");
    EXPECT(NET "--factor 1e400", 2, "--factor needs a number in (1, 1000]");
    EXPECT(NET "--factor 1", 2, "--factor needs a number in (1, 1000]");
    EXPECT(NET "--min-bytes 0", 2, "--min-bytes needs a size in 1..1125899906842624 bytes",
           "binary: 1M = 1,048,576 bytes");
    EXPECT(NET "--max-bytes 2000T", 2, "--max-bytes needs a size in 1..1125899906842624 bytes");
    EXPECT(NET "--min-bytes 1M --max-bytes 1K", 2, "--min-bytes (1048576) is above --max-bytes (1024)");
    /* binary multiples: 1M is 2^20 bytes */
    EXPECT(NET "--min-bytes 1M --max-bytes 1M", 0, "     1048576 ");
    /* the world is bounded by the key's range, and the largest is quick */
    EXPECT("net all_reduce cluster.topology=dgx-h100 cluster.num_gpus=2147483648", 2,
           "command line: cluster.num_gpus: must be in [1, 262144]");
    EXPECT("net all_to_all cluster.topology=dgx-h100 cluster.num_gpus=262144", 0, "on 262144 GPUs");
}

/* The two size conventions are named where the options are described. */
Test(hostile_config, help_names_the_conventions)
{
    EXPECT("--help", 0, "binary: 1M = 1,048,576 bytes", "decimal: 2T = 2e12 tokens", "type, default and range");
    EXPECT("search --help", 0, "decimal: 2T = 2e12 tokens", "--gpus in\n1..262144");
}
