/**
 * The automatic layout of a journey graph, for steps with no position saved in this browser (the
 * service stores none): layers by breadth-first depth from the trigger, top to bottom, each layer
 * centred, branches ordered yes/event before no/timeout so they read left to right. Steps the
 * trigger does not reach are laid out below, from those nothing leads to. Pure, so it is unit-tested.
 */

export interface Point {
  x: number;
  y: number;
}

export interface LayoutInput {
  steps: ReadonlyArray<{ id: string }>;
  transitions: ReadonlyArray<{ fromStepId: string; toStepId: string; branch: string | null }>;
  entryStepId: string | undefined;
}

export const COLUMN_GAP = 260;
export const ROW_GAP = 140;

const BRANCH_ORDER: Record<string, number> = { yes: 0, event: 0, null: 1, no: 2, timeout: 2 };

export function layoutJourney({ steps, transitions, entryStepId }: LayoutInput): Record<string, Point> {
  const ids = new Set(steps.map((s) => s.id));
  const children = new Map<string, string[]>();
  const hasIncoming = new Set<string>();
  const sorted = [...transitions]
    .filter((t) => ids.has(t.fromStepId) && ids.has(t.toStepId))
    .sort((a, b) => (BRANCH_ORDER[String(a.branch)] ?? 1) - (BRANCH_ORDER[String(b.branch)] ?? 1));
  for (const t of sorted) {
    children.set(t.fromStepId, [...(children.get(t.fromStepId) ?? []), t.toStepId]);
    if (t.fromStepId !== t.toStepId) hasIncoming.add(t.toStepId);
  }

  const layers: string[][] = [];
  const placed = new Set<string>();
  /** Breadth-first from `roots`, the first of them at layer `start`. */
  const walk = (roots: string[], start: number) => {
    let frontier = roots.filter((id) => !placed.has(id));
    frontier.forEach((id) => placed.add(id));
    for (let depth = start; frontier.length > 0; depth += 1) {
      (layers[depth] ??= []).push(...frontier);
      const next: string[] = [];
      for (const id of frontier) {
        for (const child of children.get(id) ?? []) {
          if (placed.has(child)) continue;
          placed.add(child);
          next.push(child);
        }
      }
      frontier = next;
    }
  };

  if (entryStepId && ids.has(entryStepId)) walk([entryStepId], 0);
  // What the trigger does not reach: first the steps nothing leads to, then whatever is left (a loop).
  const rest = () => steps.map((s) => s.id).filter((id) => !placed.has(id));
  const roots = rest().filter((id) => !hasIncoming.has(id));
  if (roots.length > 0) walk(roots, layers.length);
  for (const id of rest()) walk([id], layers.length);

  const positions: Record<string, Point> = {};
  layers.forEach((layer, depth) => {
    layer.forEach((id, index) => {
      positions[id] = { x: (index - (layer.length - 1) / 2) * COLUMN_GAP, y: depth * ROW_GAP };
    });
  });
  return positions;
}

/** A free spot for a step added without a drop point: below everything, or below the step it follows. */
export function spotBelow(positions: ReadonlyArray<Point>, under?: Point): Point {
  if (under) {
    const taken = (p: Point) => positions.some((q) => Math.abs(q.x - p.x) < COLUMN_GAP / 2 && Math.abs(q.y - p.y) < ROW_GAP / 2);
    let spot = { x: under.x, y: under.y + ROW_GAP };
    while (taken(spot)) spot = { x: spot.x + COLUMN_GAP, y: spot.y };
    return spot;
  }
  if (positions.length === 0) return { x: 0, y: 0 };
  const lowest = Math.max(...positions.map((p) => p.y));
  return { x: Math.min(...positions.map((p) => p.x)), y: lowest + ROW_GAP };
}
