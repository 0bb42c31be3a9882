import type { Point } from './layout';

/**
 * Where the user put each step, kept in this browser per journey: the service stores no positions,
 * and a step without one is placed by the automatic layout.
 */
const key = (journeyId: string) => `tidings:journey-positions:${journeyId}`;

export function loadPositions(journeyId: string): Record<string, Point> {
  try {
    const raw = localStorage.getItem(key(journeyId));
    const parsed: unknown = raw ? JSON.parse(raw) : {};
    if (!parsed || typeof parsed !== 'object') return {};
    const out: Record<string, Point> = {};
    for (const [id, p] of Object.entries(parsed as Record<string, unknown>)) {
      const { x, y } = (p ?? {}) as Partial<Point>;
      if (typeof x === 'number' && typeof y === 'number' && Number.isFinite(x) && Number.isFinite(y)) out[id] = { x, y };
    }
    return out;
  } catch {
    return {};
  }
}

export function savePositions(journeyId: string, positions: Record<string, Point>): void {
  try {
    localStorage.setItem(key(journeyId), JSON.stringify(positions));
  } catch {
    // A full or disabled storage only loses the arrangement; the journey itself is on the server.
  }
}

export function forgetPositions(journeyId: string): void {
  try {
    localStorage.removeItem(key(journeyId));
  } catch {
    // Nothing to forget without storage.
  }
}
