/**
 * Bounds the password verifications (argon2id, ~19 MiB and tens of milliseconds of a core each)
 * that run and wait at once: per address, so that a flood from one address holds a couple of
 * places and never delays anyone else's sign-in, and for the process, so that a flood from many
 * addresses is answered at once instead of queueing for tens of seconds. Whatever finds no place
 * is turned away at once (the route answers 503 with Retry-After).
 *
 * A sign-in takes its address's place first, before any other work (a flood from one address
 * then costs nothing but this check), and a place in the process's queue only when it is ready to
 * verify: a sign-in that is made to wait (a slowed account) holds no process place meanwhile.
 */
export interface PasswordCheckBounds {
  /** Verifications running at once (argon2 runs on libuv's thread pool). */
  running: number;
  /** Verifications waiting for a running place; past this the process is busy. */
  queued: number;
  /** Sign-ins in progress from one address (IPv6: one prefix). */
  perAddress: number;
}

export class PasswordChecksBusy extends Error {
  constructor() {
    super('too many password verifications are running and waiting');
  }
}

export interface PasswordCheckPlace {
  /** Runs the verification when a running place is free; throws PasswordChecksBusy when the queue is full. */
  run<T>(verification: () => Promise<T>): Promise<T>;
  /** Gives the address's place up once `run` has settled (or was never called); a second call does nothing. */
  leave(): void;
}

export type Admission = { admitted: true; place: PasswordCheckPlace } | { admitted: false };

export class PasswordChecks {
  #running = 0;
  readonly #waiting: Array<() => void> = [];
  /** Places held per address. */
  readonly #byAddress = new Map<string, number>();

  constructor(private readonly bounds: PasswordCheckBounds) {}

  /** A place for one sign-in from `address`, or none; synchronous, costs nothing. */
  admit(address: string): Admission {
    const fromAddress = this.#byAddress.get(address) ?? 0;
    if (fromAddress >= this.bounds.perAddress || this.#queueIsFull()) return { admitted: false };
    this.#byAddress.set(address, fromAddress + 1);
    let left = false;
    const leave = () => {
      if (left) return;
      left = true;
      const remaining = (this.#byAddress.get(address) ?? 1) - 1;
      if (remaining === 0) this.#byAddress.delete(address);
      else this.#byAddress.set(address, remaining);
    };
    const run = async <T>(verification: () => Promise<T>): Promise<T> => {
      await this.#acquire();
      try {
        return await verification();
      } finally {
        this.#release();
      }
    };
    return { admitted: true, place: { run, leave } };
  }

  /** What is held now, for tests. */
  stats(): { running: number; waiting: number; addresses: number } {
    return { running: this.#running, waiting: this.#waiting.length, addresses: this.#byAddress.size };
  }

  #queueIsFull(): boolean {
    return this.#running >= this.bounds.running && this.#waiting.length >= this.bounds.queued;
  }

  #acquire(): Promise<void> {
    if (this.#running < this.bounds.running) {
      this.#running++;
      return Promise.resolve();
    }
    if (this.#waiting.length >= this.bounds.queued) return Promise.reject(new PasswordChecksBusy());
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(): void {
    const next = this.#waiting.shift();
    // The running place passes straight to the next in line.
    if (next) next();
    else this.#running--;
  }
}
