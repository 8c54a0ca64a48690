/* `vouch kernels`: the kernel numerics suite (suites/kernels.h) from the command line. */
#ifndef VOUCH_RUNNER_CMD_KERNELS_H
#define VOUCH_RUNNER_CMD_KERNELS_H

/* argv[0] is "kernels"; returns the exit code: 0 all ran cases passed, 1 a case failed,
 * 2 usage error. */
int cmd_kernels(int argc, char **argv);

#endif
