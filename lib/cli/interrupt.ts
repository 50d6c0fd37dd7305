/**
 * Ctrl-C for commands that run one generation: the first SIGINT aborts (the command then prints what came and
 * exits 130), a second one exits at once. A closed stdout (`vtengine run ... | head`) also aborts, quietly.
 * @internal
 * @module
 */

/** The abort signal of a command and how it ended. @internal */
export interface Interrupt {
  readonly signal: AbortSignal;
  /** Whether stdout was closed by its reader. */
  readonly stdoutClosed: boolean;
  /** Removes the handlers. */
  release(): void;
}

/** Installs the SIGINT and stdout handlers for one command. @internal */
export function onInterrupt(): Interrupt {
  const controller = new AbortController();
  let stdoutClosed = false;
  const onSigint = (): void => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort();
  };
  const onStdoutError = (err: NodeJS.ErrnoException): void => {
    if (err.code !== 'EPIPE') throw err;
    stdoutClosed = true;
    controller.abort();
  };
  process.on('SIGINT', onSigint);
  process.stdout.on('error', onStdoutError);
  return {
    signal: controller.signal,
    get stdoutClosed() {
      return stdoutClosed;
    },
    release() {
      process.off('SIGINT', onSigint);
      process.stdout.off('error', onStdoutError);
    },
  };
}
