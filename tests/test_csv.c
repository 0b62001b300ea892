/* csv: the RFC 4180 reader — quoted fields with commas, doubled quotes and
 * line breaks, CRLF, a byte-order mark, blank lines, the original text of
 * each record, and errors that name the line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"

static void parse_ok(const char *text, csv_table *t)
{
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(csv_parse(text, strlen(text), "t.csv", t, &err), SIM_OK, "%s", err.msg);
}

Test(csv, quoted_fields)
{
    csv_table t;
    parse_ok("a,b,c\n"
             "1,\"x, y\",\"say \"\"hi\"\"\"\n"
             "\"two\nlines\",,end\n",
             &t);
    cr_assert_eq(t.ncols, 3);
    cr_assert_eq(t.nrows, 2);
    cr_assert_str_eq(csv_cell(&t, 0, 1), "x, y");
    cr_assert_str_eq(csv_cell(&t, 0, 2), "say \"hi\"");
    cr_assert_str_eq(csv_cell(&t, 1, 0), "two\nlines");
    cr_assert_str_eq(csv_cell(&t, 1, 1), "");
    /* the original text of each record, without its terminator */
    cr_assert_str_eq(t.raw[0], "1,\"x, y\",\"say \"\"hi\"\"\"");
    cr_assert_str_eq(t.raw[1], "\"two\nlines\",,end");
    cr_assert_eq(t.line[0], 2);
    cr_assert_eq(t.line[1], 3);
    cr_assert_str_eq(t.header_raw, "a,b,c");
    cr_assert_eq(csv_col(&t, "c"), 2);
    cr_assert_eq(csv_col(&t, "d"), -1);
    cr_assert_str_eq(csv_cell(&t, 0, -1), "");
    csv_free(&t);
}

Test(csv, crlf_bom_blank_lines_and_no_final_newline)
{
    csv_table t;
    parse_ok("\xEF\xBB\xBFid,v\r\n\r\nr1,1\r\n\nr2,2", &t);
    cr_assert_str_eq(t.header[0], "id");
    cr_assert_eq(t.nrows, 2);
    cr_assert_str_eq(csv_cell(&t, 1, 1), "2");
    cr_assert_str_eq(t.raw[0], "r1,1");
    cr_assert_eq(t.line[1], 5);
    csv_free(&t);
}

Test(csv, errors_name_the_line)
{
    csv_table t;
    sim_err err;
    const char *bad[][2] = {
        { "a,b\n1,2\n3\n", "record has 1 fields" },
        { "a,b\n1,\"open\n", "unterminated" },
        { "a,b\n1,x\"y\n", "quote inside" },
        { "a,b\n1,\"x\"y\n", "after the closing quote" },
        { "", "no header" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        sim_err_clear(&err);
        cr_assert_eq(csv_parse(bad[k][0], strlen(bad[k][0]), "t.csv", &t, &err), SIM_EINVAL,
                     "case %zu", k);
        cr_assert(strstr(err.msg, bad[k][1]), "case %zu: %s", k, err.msg);
        cr_assert_str_eq(err.file, "t.csv");
        cr_assert_eq(t.nrows, 0);
    }
    sim_err_clear(&err);
    cr_assert_eq(csv_parse("a,b\n1,2\n3\n", 10, "t.csv", &t, &err), SIM_EINVAL);
    cr_assert_eq(err.line, 3);
}

Test(csv, write_field_round_trips)
{
    const char *vals[] = { "plain", "a,b", "say \"x\"", " lead", "two\nlines", "" };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fputs("h1,h2,h3,h4,h5,h6\n", f);
    for (size_t k = 0; k < 6; k++) {
        if (k)
            fputc(',', f);
        csv_write_field(f, vals[k]);
    }
    fputc('\n', f);
    fclose(f);
    csv_table t;
    parse_ok(buf, &t);
    for (size_t k = 0; k < 6; k++)
        cr_assert_str_eq(csv_cell(&t, 0, (int)k), vals[k]);
    csv_free(&t);
    free(buf);
}
