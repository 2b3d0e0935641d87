import argon2 from 'argon2';

// OWASP's argon2id baseline (19 MiB, 2 passes) keeps sign-in fast on a 2-core machine.
const options = { type: argon2.argon2id, memoryCost: 19 * 1024, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, options);
}

/** A hash of a password nobody knows: verifying against it costs as much as a real check. */
let decoy: Promise<string> | undefined;

function decoyHash(): Promise<string> {
  decoy ??= hashPassword('decoy password that matches nothing');
  return decoy;
}

export async function verifyPassword(hash: string | undefined, password: string): Promise<boolean> {
  // Unknown accounts still pay for one verification, so timing does not reveal which emails exist.
  const target = hash ?? (await decoyHash());
  try {
    const ok = await argon2.verify(target, password);
    return ok && hash !== undefined;
  } catch {
    return false;
  }
}
