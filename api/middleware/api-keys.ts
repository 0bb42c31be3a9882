import type { Clock } from '../../db/clock';
import { Coalescer } from '../../db/coalescer';
import type { Orm } from '../../db/orm';
import { onKeysChanged } from '../../db/projects/key-changes';
import { findProjectsByKeys, type KeyOwner } from '../../db/projects/projects';

/** How long an API process takes a key's project as read, the longest a rotated key keeps working elsewhere. */
export const KEY_MAX_AGE_MS = 1_000;
/** Past this many keys (most of them unknown ones, say), the cache starts over rather than grow. */
const MAX_KEYS = 10_000;

/**
 * API keys → their projects, read at most once per KEY_MAX_AGE_MS per key in each API process, so a
 * request with a known key costs no statement. A change made in this process (rotation, disabling,
 * deletion: db/projects/key-changes.ts) is seen by the next request. Keys not in the cache are read
 * in one statement per batch of concurrent requests (db/coalescer.ts).
 */
export class ApiKeys {
  private readonly known = new Map<string, { owner: KeyOwner | null; readAt: number }>();
  /** Moves on every change: a read that was in flight across one is answered but not kept. */
  private changes = 0;
  private readonly reads: Coalescer<string, KeyOwner | null>;

  constructor(orm: Orm, private readonly clock: Clock) {
    // One manager for every batch: raw statements only take a pooled connection through it.
    const em = orm.em.fork();
    this.reads = new Coalescer((keys) => findProjectsByKeys(em, keys));
    // For as long as the process: an API process builds its dependencies once.
    onKeysChanged((projectId) => this.forget(projectId));
  }

  async find(key: string): Promise<KeyOwner | null> {
    const now = this.clock().getTime();
    const cached = this.known.get(key);
    if (cached && now - cached.readAt < KEY_MAX_AGE_MS && now >= cached.readAt) return cached.owner;
    const changes = this.changes;
    const owner = await this.reads.run(key);
    if (changes !== this.changes) return owner;
    if (this.known.size >= MAX_KEYS) this.known.clear();
    this.known.set(key, { owner, readAt: now });
    return owner;
  }

  private forget(projectId: string): void {
    this.changes++;
    for (const [key, entry] of this.known) if (entry.owner?.project.id === projectId) this.known.delete(key);
  }
}
