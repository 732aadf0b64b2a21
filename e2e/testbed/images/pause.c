/*
 * The pod sandbox's process for the test bed's containerd (the upstream pause image cannot be
 * pulled here): sleeps until SIGTERM or SIGINT, reaps any child re-parented to it (it is PID 1 of
 * the pod's PID namespace when the namespace is shared). Built with `gcc -static` by
 * e2e/testbed/images/pause.ts into a FROM-scratch image.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_stop(int sig) { (void)sig; stop = 1; }

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pko-testbed pause " PAUSE_VERSION);
    return 0;
  }
  if (getpid() != 1) fputs("pause: warning: not PID 1\n", stderr);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sa.sa_handler = on_child;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  sigaction(SIGCHLD, &sa, NULL);
  /* Block the stop signals outside sigsuspend, so one that arrives between the test and the
   * wait is not lost. */
  sigset_t block, wait_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &wait_mask);
  sigdelset(&wait_mask, SIGTERM);
  sigdelset(&wait_mask, SIGINT);
  while (!stop) sigsuspend(&wait_mask);
  return 0;
}
