/**
 * Secrets reach the CLI on standard input, at a prompt or through an environment variable the
 * caller names, never in argv: every user of the machine can read a process's arguments (ps,
 * /proc/PID/cmdline) and the shell keeps them in its history.
 */

/** The options that once carried a secret in argv, and how to pass it now. */
const SECRETS_NOT_IN_ARGV: Readonly<Record<string, string>> = {
  '--password':
    '--password is not accepted: a password on the command line shows in ps and in shell history. ' +
    'Type it at the prompt, pipe it on standard input (first line), or name an environment variable that holds it with --password-env VAR',
  '--secret':
    '--secret is not accepted: a secret on the command line shows in ps and in shell history. ' +
    'Name an environment variable that holds it with --secret-env VAR, or pass --secret-stdin and pipe it on standard input (or type it at the prompt)',
};

/** The refusal for the first argument that tries to pass a secret in argv (`--password x`, `--password=x`), if any. */
export function secretInArgv(args: readonly string[]): string | null {
  for (const arg of args) {
    const name = arg.split('=', 1)[0]!;
    const refusal = SECRETS_NOT_IN_ARGV[name];
    if (refusal) return refusal;
  }
  return null;
}

/** A line longer than any password or client secret: standard input is not read past it. */
const MAX_SECRET_BYTES = 4096;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export class SecretInputError extends Error {}

export interface SecretSources {
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadStream;
  /** Where the prompt goes (stderr: stdout carries the JSON result). */
  prompt: NodeJS.WriteStream;
}

/** From the variable named `envName` if given, else a prompt without echo on a terminal, else the first line of standard input. */
export async function readSecret(what: string, envName: string | undefined, sources: SecretSources): Promise<string> {
  const secret =
    envName !== undefined
      ? fromEnvironment(what, envName, sources.env)
      : sources.stdin.isTTY
        ? await fromPrompt(what, sources.stdin, sources.prompt)
        : await firstLine(what, sources.stdin);
  if (secret.length === 0) throw new SecretInputError(`no ${what} given`);
  if (secret.includes('\0')) throw new SecretInputError(`the ${what} contains a NUL character`);
  return secret;
}

function fromEnvironment(what: string, name: string, env: NodeJS.ProcessEnv): string {
  if (!ENV_NAME.test(name)) throw new SecretInputError(`not an environment variable name: ${name.slice(0, 128)}`);
  const value = env[name];
  if (value === undefined) throw new SecretInputError(`environment variable ${name} (the ${what}) is not set`);
  return value;
}

function decodeStrict(what: string, bytes: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new SecretInputError(`the ${what} is not valid UTF-8`);
  }
}

/** The first line of a pipe or file, without its line ending; the rest is left unread. */
function firstLine(what: string, stdin: NodeJS.ReadStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error: Error | null) => {
      stdin.off('data', onData).off('end', onEnd).off('error', onError);
      stdin.pause();
      if (error) return reject(error);
      const bytes = Buffer.concat(chunks);
      const newline = bytes.indexOf(0x0a);
      const line = newline >= 0 ? bytes.subarray(0, newline) : bytes;
      try {
        resolve(decodeStrict(what, line.at(-1) === 0x0d ? line.subarray(0, -1) : line));
      } catch (decodeError) {
        reject(decodeError as Error);
      }
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (chunk.includes(0x0a)) finish(null);
      else if (size > MAX_SECRET_BYTES) finish(new SecretInputError(`the ${what} on standard input is longer than ${MAX_SECRET_BYTES} bytes`));
    };
    const onEnd = () => finish(null);
    const onError = (error: Error) => finish(error);
    stdin.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

/** Reads a line from the terminal in raw mode, so that nothing typed is echoed. */
function fromPrompt(what: string, stdin: NodeJS.ReadStream, prompt: NodeJS.WriteStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const typed: number[] = [];
    // Raw before the prompt shows: a key typed the moment it appears must not be echoed.
    stdin.setRawMode(true);
    prompt.write(`${what[0]!.toUpperCase()}${what.slice(1)}: `);
    const finish = (error: Error | null) => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      prompt.write('\n');
      if (error) return reject(error);
      try {
        resolve(decodeStrict(what, Buffer.from(typed)));
      } catch (decodeError) {
        reject(decodeError as Error);
      }
    };
    const onData = (chunk: Buffer) => {
      for (const byte of chunk) {
        if (byte === 0x0d || byte === 0x0a || byte === 0x04) return finish(null);
        if (byte === 0x03) return finish(new SecretInputError('interrupted'));
        if (byte === 0x7f || byte === 0x08) {
          // Backspace removes one character, that is one UTF-8 sequence.
          while (typed.length > 0 && (typed.pop()! & 0xc0) === 0x80);
          continue;
        }
        typed.push(byte);
        if (typed.length > MAX_SECRET_BYTES) return finish(new SecretInputError(`the ${what} is longer than ${MAX_SECRET_BYTES} bytes`));
      }
    };
    stdin.on('data', onData);
    stdin.resume();
  });
}
