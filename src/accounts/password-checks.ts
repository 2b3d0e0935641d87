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
 *
 * The queue is shared fairly across networks (issue 28 §1): a sign-in is weighed by the places
 * held by the busiest network it belongs to (IPv4 address and /24; IPv6 /64, /56 and /48), and a
 * sign-in from an address or for an account with a recent success comes before any other. The
 * lightest waits first; when the queue is full, a newcomer lighter than the heaviest waiting
 * sign-in takes its place (that one is turned away), so forty /64s of one /56 or twenty
 * addresses of one /24 weigh as one heavy network, and a sign-in from a network of its own is
 * never kept out by them.
 */
export interface PasswordCheckBounds {
  /** Verifications running at once (argon2 runs on libuv's thread pool). */
  running: number;
  /** Verifications waiting for a running place; past this the process is busy. */
  queued: number;
  /** Sign-ins in progress from one address (IPv6: one prefix). */
  perAddress: number;
}

/** Who is signing in, as the queue weighs it. */
export interface SignInSender {
  /** The per-address key (limitedAddress): what `perAddress` counts. */
  address: string;
  /** Every network the address belongs to, narrowest first (addressPrefixes). */
  networks: readonly string[];
  /** The account tried, hashed. */
  account: string;
}

export class PasswordChecksBusy extends Error {
  constructor() {
    super('too many password verifications are running and waiting');
  }
}

export interface PasswordCheckPlace {
  /** Runs the verification when a running place is free; throws PasswordChecksBusy when the queue has no room for it. */
  run<T>(verification: () => Promise<T>): Promise<T>;
  /** Gives the address's place up once `run` has settled (or was never called); a second call does nothing. */
  leave(): void;
}

export type Admission = { admitted: true; place: PasswordCheckPlace } | { admitted: false };

/** Addresses and accounts remembered as recently successful, each; the oldest are forgotten first. */
const RECENT_SUCCESSES = 10_000;

interface Waiting {
  networks: readonly string[];
  favoured: boolean;
  /** Arrival order: among equals, the earlier waits less. */
  arrival: number;
  start(): void;
  refuse(): void;
}

export class PasswordChecks {
  #running = 0;
  #arrivals = 0;
  readonly #waiting: Waiting[] = [];
  /** Places held per address. */
  readonly #byAddress = new Map<string, number>();
  /** Places held per network (every level). */
  readonly #byNetwork = new Map<string, number>();
  /** Narrowest networks and accounts with a recent success, oldest first. */
  readonly #recentNetworks = new Map<string, true>();
  readonly #recentAccounts = new Map<string, true>();

  constructor(private readonly bounds: PasswordCheckBounds) {}

  /** A place for one sign-in, or none; synchronous, costs nothing. */
  admit(sender: SignInSender): Admission {
    const { address, networks } = sender;
    const fromAddress = this.#byAddress.get(address) ?? 0;
    if (fromAddress >= this.bounds.perAddress) return { admitted: false };
    const favoured = this.#recentNetworks.has(networks[0]!) || this.#recentAccounts.has(sender.account);
    // A full queue with nobody this sign-in could go before: turned away before any other work.
    if (this.#queueIsFull() && !this.#heaviestWaitingIsHeavierThan(favoured, this.#weight(networks) + 1)) return { admitted: false };
    this.#byAddress.set(address, fromAddress + 1);
    for (const network of networks) this.#byNetwork.set(network, (this.#byNetwork.get(network) ?? 0) + 1);
    let left = false;
    const leave = () => {
      if (left) return;
      left = true;
      decrement(this.#byAddress, address);
      for (const network of networks) decrement(this.#byNetwork, network);
    };
    const run = async <T>(verification: () => Promise<T>): Promise<T> => {
      await this.#acquire(networks, favoured);
      try {
        return await verification();
      } finally {
        this.#release();
      }
    };
    return { admitted: true, place: { run, leave } };
  }

  /** A sign-in succeeded: its address (narrowest network) and account come first from now on. */
  succeeded(sender: Pick<SignInSender, 'networks' | 'account'>): void {
    remember(this.#recentNetworks, sender.networks[0]!);
    remember(this.#recentAccounts, sender.account);
  }

  /** What is held now, for tests. */
  stats(): { running: number; waiting: number; addresses: number } {
    return { running: this.#running, waiting: this.#waiting.length, addresses: this.#byAddress.size };
  }

  #queueIsFull(): boolean {
    return this.#running >= this.bounds.running && this.#waiting.length >= this.bounds.queued;
  }

  /** Places held by the busiest of these networks. */
  #weight(networks: readonly string[]): number {
    let heaviest = 0;
    for (const network of networks) heaviest = Math.max(heaviest, this.#byNetwork.get(network) ?? 0);
    return heaviest;
  }

  /** Whether `a` should wait behind `b`: not favoured behind favoured, heavier behind lighter, later behind earlier. */
  #behind(a: { favoured: boolean; weight: number; arrival: number }, b: { favoured: boolean; weight: number; arrival: number }): boolean {
    if (a.favoured !== b.favoured) return b.favoured;
    if (a.weight !== b.weight) return a.weight > b.weight;
    return a.arrival > b.arrival;
  }

  /** The index of the waiting sign-in that comes first (`first`) or last. */
  #pick(first: boolean): number {
    let chosen = -1;
    let chosenRank: { favoured: boolean; weight: number; arrival: number } | null = null;
    for (const [index, entry] of this.#waiting.entries()) {
      const rank = { favoured: entry.favoured, weight: this.#weight(entry.networks), arrival: entry.arrival };
      if (chosenRank === null || (first ? this.#behind(chosenRank, rank) : this.#behind(rank, chosenRank))) {
        chosen = index;
        chosenRank = rank;
      }
    }
    return chosen;
  }

  #heaviestWaitingIsHeavierThan(favoured: boolean, weight: number): boolean {
    const last = this.#waiting[this.#pick(false)];
    if (!last) return false;
    return this.#behind({ favoured: last.favoured, weight: this.#weight(last.networks), arrival: last.arrival }, { favoured, weight, arrival: Infinity });
  }

  #acquire(networks: readonly string[], favoured: boolean): Promise<void> {
    if (this.#running < this.bounds.running) {
      this.#running++;
      return Promise.resolve();
    }
    if (this.#waiting.length >= this.bounds.queued) {
      // Room only by turning away the heaviest waiting sign-in, and only if it is heavier than this one.
      if (this.bounds.queued === 0 || !this.#heaviestWaitingIsHeavierThan(favoured, this.#weight(networks))) return Promise.reject(new PasswordChecksBusy());
      const [evicted] = this.#waiting.splice(this.#pick(false), 1);
      evicted!.refuse();
    }
    return new Promise((resolve, reject) =>
      this.#waiting.push({ networks, favoured, arrival: this.#arrivals++, start: resolve, refuse: () => reject(new PasswordChecksBusy()) }),
    );
  }

  #release(): void {
    const index = this.#pick(true);
    // The running place passes straight to the first in line.
    if (index >= 0) this.#waiting.splice(index, 1)[0]!.start();
    else this.#running--;
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const remaining = (counts.get(key) ?? 1) - 1;
  if (remaining === 0) counts.delete(key);
  else counts.set(key, remaining);
}

/** Remembers `key` as the newest, forgetting the oldest past the bound. */
function remember(recent: Map<string, true>, key: string): void {
  recent.delete(key);
  recent.set(key, true);
  if (recent.size > RECENT_SUCCESSES) recent.delete(recent.keys().next().value!);
}
