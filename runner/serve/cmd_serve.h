/* vouch serve: an OpenAI-compatible HTTP server over any vouch decode path (runner/serve/serve.h). */
#ifndef VOUCH_RUNNER_SERVE_CMD_SERVE_H
#define VOUCH_RUNNER_SERVE_CMD_SERVE_H

int cmd_serve(int argc, char **argv);

#endif
