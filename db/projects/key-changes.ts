/**
 * Tells this process's API-key cache (api/middleware/api-keys.ts) that a project's keys or standing changed: its
 * keys were rotated, it was disabled, enabled or deleted. The process that made the change forgets the
 * project at once; other processes re-read a key within the cache's age (docs/accounts-and-roles.md).
 */
type Listener = (projectId: string) => void;

const listeners = new Set<Listener>();

/** Returns the function that stops listening. */
export function onKeysChanged(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Call after the change is committed: a read before the commit would cache the old standing again. */
export function keysChanged(projectId: string): void {
  for (const listener of listeners) listener(projectId);
}
