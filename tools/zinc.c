/* zinc: the executor and its tools. Each subcommand lives in tools/cmd_<name>.c
 * and is listed once in tools/commands.def. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "version.h"

#define ZCMD(name, summary) int cmd_##name(int argc, char **argv);
#include "commands.def"
#undef ZCMD

typedef struct command {
    const char *name, *summary;
    int (*fn)(int, char **);
} command;

static const command commands[] = {
#define ZCMD(name, summary) {#name, summary, cmd_##name},
#include "commands.def"
#undef ZCMD
};

static void usage(FILE *to) {
    fprintf(to, "usage: zinc <command> [options]\n\n"
                "zinc runs plans compiled by zincc, and holds the tools around them.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(to, "\nRun 'zinc help <command>' (or 'zinc <command> --help') for the options of one command.\n"
                "MODEL is a GGUF (compiled for the device on first use and cached) or a plan from zincc.\n"
                "Exit status: 0 success, 2 a file could not be read or written, 3..8 other failures\n"
                "(docs/security.md), 64 a usage error.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") && argc > 2) { /* zinc help CMD: that command's --help */
        char *help[] = {argv[2], "--help", NULL};
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (!strcmp(argv[2], commands[i].name)) return commands[i].fn(2, help);
        fprintf(stderr, "zinc: unknown command '%s' (try 'zinc --help')\n", argv[2]);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("zinc %s\n", ZINC_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "zinc: unknown command '%s' (try 'zinc --help')\n", argv[1]);
    return CLI_EXIT_USAGE;
}
