/**
 * A start-up problem explained for the operator (port taken, directory unreachable, Temporal CLI
 * missing...): the CLI prints the message alone, without a stack trace.
 */
export class StartupError extends Error {
  override name = 'StartupError';
}
