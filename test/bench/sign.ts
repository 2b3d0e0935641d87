/**
 * An RS256 signature alone: jose SignJWT with a 2048-bit key and ID-token-like claims, as many as
 * one core signs in the given milliseconds (run.ts pins this process to the server's core while
 * the server idles). A few signatures in flight at once, since WebCrypto signs off the main thread.
 * Prints {"opsPerSecond": n} on stdout.
 */
import { generateKeyPair, SignJWT } from 'jose';
import { performance } from 'node:perf_hooks';

async function main(): Promise<void> {
  const durationMs = Number(process.argv[2] ?? 3000);
  const { privateKey } = await generateKeyPair('RS256', { modulusLength: 2048 });
  const sign = () =>
    new SignJWT({ auth_time: 1_700_000_000, email: 'bench-1@example.test', email_verified: false, name: 'Bench User 1' })
      .setProtectedHeader({ alg: 'RS256', kid: 'bench', typ: 'JWT' })
      .setIssuer('http://127.0.0.1:3000')
      .setSubject('6f1c7a0e-0000-4000-8000-000000000001')
      .setAudience('tv_bench')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
  // Warm-up.
  for (let i = 0; i < 50; i++) await sign();
  let done = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (performance.now() < end) {
        await sign();
        done++;
      }
    }),
  );
  process.stdout.write(`${JSON.stringify({ opsPerSecond: done / ((performance.now() - start) / 1000) })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`sign failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
