/**
 * Start-up mistakes a person makes (a port in use, a bad --seed file, --root naming a file) end the program
 * with ONE line saying what is wrong and what to do, and exit code 2 — never a stack trace. Anything else
 * that fails at start is a real fault: its stack goes to stderr with exit code 1.
 */
export class StartupError extends Error {}

/** A listen failure in words, with the option that fixes it; undefined for faults that are not the user's. */
export function listenFailure(err: unknown, host: string, port: number): StartupError | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const where = `${host}:${port}`;
  if (code === "EADDRINUSE")
    return new StartupError(`port ${port} on ${host} is already in use: stop what holds it, or pass --port <n> (--port 0 picks a free one)`);
  if (code === "EACCES") return new StartupError(`not allowed to listen on ${where} (ports below 1024 need privileges): pass --port <n> above 1023`);
  if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND")
    return new StartupError(`cannot listen on ${where}: ${host} is not an address of this machine; pass --host 127.0.0.1 or an address it has`);
  return undefined;
}

/** The one-line hint printed after an option error, instead of the whole usage text. */
export function optionErrorLine(program: string, message: string): string {
  return `${program}: ${message} (${program} --help lists the options)\n`;
}

/** Prints a start-up failure and exits: one line and code 2 for the user's mistakes, the stack and 1 otherwise. */
export function exitOnStartFailure(program: string, err: unknown, isUserError: (err: unknown) => boolean): never {
  if (err instanceof StartupError || isUserError(err)) {
    process.stderr.write(`${program}: ${(err as Error).message}\n`);
    process.exit(2);
  }
  process.stderr.write(`${program}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
}
