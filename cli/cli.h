#ifndef FA8_CLI_H
#define FA8_CLI_H
/* Subcommands of the `fa8` executable; argv[0] is the subcommand's first argument. */
int cli_lua(int argc, char **argv);    /* gen, list, targets, decode (argv includes the subcommand) */
int cli_probe(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_tune(int argc, char **argv);
int cli_list_tuned(int argc, char **argv);   /* fa8 list --tuned */
#endif
