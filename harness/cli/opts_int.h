/* opts_int.h: the harness option table shared by opts.c (the parser, help, mode checks) and
 * opts_table.c (the table itself and the value parsers it names). Internal to those two files. */
#ifndef SB_HARNESS_OPTS_INT_H
#define SB_HARNESS_OPTS_INT_H
#include "harness/cli/opts.h"
#include <stddef.h>
#include <stdio.h>

#define H_OPT_MAX 192  /* room for the table's entries (checked in opts_table.c) */
#define F(field) offsetof(h_opts_t, field)

enum { K_SECTION, K_FLAG, K_STR, K_INT, K_CHOICE, K_FN, K_NONE, K_HELP };

typedef struct s_opt h_opt_t;
struct s_opt {
    const char *name;                 /* long name (NULL: a help section line only) */
    int kind;                         /* K_*: how the value is taken */
    size_t off;                       /* where it goes in h_opts_t (K_FLAG, K_STR, K_INT, K_CHOICE, some K_FN) */
    int lo, hi;                       /* K_INT bounds */
    const char *arg;                  /* K_CHOICE: "a|b|c"; otherwise unused */
    const char *want;                 /* what a bad value should have been (error message) */
    int (*fn)(h_opts_t *o, const h_opt_t *d, const char *v); /* K_FN; 0 or ERR_INVAL (err_set) */
    const char *help;                 /* help text (whole lines); NULL: none or shared with a neighbour */
    const char *modes;                /* K_SECTION: the modes its options concern (`harness MODE --help`);
                                       * an option: its own modes, when fewer than its section's */
    void (*help_fn)(FILE *f);         /* dynamic help text (the engine table's) */
};

extern const h_opt_t h_opt_table[];
extern const size_t h_opt_count;

/* value parsers: 0, or -1 for a bad value */
int  h_opt_parse_size(const char *s, size_t *out);
int  h_opt_parse_int(const char *s, int lo, int hi, int *out);
/* ERR_INVAL with "bad value 'VAL' for FLAG: expected WANT" */
int  h_opt_bad(const char *flag, const char *val, const char *want);
int  h_opt_known_mode(const char *m);
/* the default of option d as `harness MODE --help` shows it ("" when none) */
void h_opt_default_of(const h_opts_t *o, const h_opt_t *d, char *buf, size_t len);

/* 1 for an option whose default `harness MODE --help` leaves out (another option shows it) */
int  h_opt_no_default(const h_opt_t *d);

#endif
