/** The editor's automatic layout (web/src/pages/journeys/layout.ts): layers by depth from the trigger. */

// The web app is an ES module package (web/package.json) written for a bundler; this CommonJS test
// loads the module at run time by a path the type checker leaves alone, and takes its types as ESM.
type Layout = typeof import('../../web/src/pages/journeys/layout.js', { with: { 'resolution-mode': 'import' } });
const LAYOUT_MODULE = '../../web/src/pages/journeys/layout';
let layoutJourney: Layout['layoutJourney'];
let spotBelow: Layout['spotBelow'];
let COLUMN_GAP: number;
let ROW_GAP: number;

beforeAll(async () => {
  ({ layoutJourney, spotBelow, COLUMN_GAP, ROW_GAP } = (await import(LAYOUT_MODULE)) as Layout);
});

const t = (fromStepId: string, toStepId: string, branch: string | null = null) => ({ fromStepId, toStepId, branch });
const steps = (...ids: string[]) => ids.map((id) => ({ id }));

test('a chain is one column, one row per step in order from the trigger', () => {
  const layout = layoutJourney({ steps: steps('c', 'trigger', 'b', 'a'), transitions: [t('trigger', 'a'), t('a', 'b'), t('b', 'c')], entryStepId: 'trigger' });
  expect(layout).toEqual({
    trigger: { x: 0, y: 0 },
    a: { x: 0, y: ROW_GAP },
    b: { x: 0, y: 2 * ROW_GAP },
    c: { x: 0, y: 3 * ROW_GAP },
  });
});

test('branches share a row, centred, yes and event to the left of no and timeout; a step sits at its shortest depth', () => {
  const layout = layoutJourney({
    steps: steps('trigger', 'cond', 'no', 'yes', 'wait', 'timeout', 'event', 'end'),
    transitions: [
      t('trigger', 'cond'),
      t('cond', 'no', 'no'),
      t('cond', 'yes', 'yes'),
      t('yes', 'wait'),
      t('wait', 'timeout', 'timeout'),
      t('wait', 'event', 'event'),
      t('no', 'end'),
      t('event', 'end'),
    ],
    entryStepId: 'trigger',
  });
  expect(layout.cond).toEqual({ x: 0, y: ROW_GAP });
  expect(layout.yes).toEqual({ x: -COLUMN_GAP / 2, y: 2 * ROW_GAP });
  expect(layout.no).toEqual({ x: COLUMN_GAP / 2, y: 2 * ROW_GAP });
  // "end" is reached from "no" at depth 3, before "event" (depth 4) also leads to it.
  expect(layout.wait!.y).toBe(3 * ROW_GAP);
  expect(layout.end!.y).toBe(3 * ROW_GAP);
  expect(layout.wait!.x).toBeLessThan(layout.end!.x);
  expect(layout.event).toEqual({ x: -COLUMN_GAP / 2, y: 4 * ROW_GAP });
  expect(layout.timeout).toEqual({ x: COLUMN_GAP / 2, y: 4 * ROW_GAP });
});

test('a loop back to an earlier step does not move it', () => {
  const layout = layoutJourney({
    steps: steps('trigger', 'delay', 'cond'),
    transitions: [t('trigger', 'delay'), t('delay', 'cond'), t('cond', 'delay', 'no')],
    entryStepId: 'trigger',
  });
  expect(layout).toEqual({ trigger: { x: 0, y: 0 }, delay: { x: 0, y: ROW_GAP }, cond: { x: 0, y: 2 * ROW_GAP } });
});

test('steps the trigger does not reach go below, laid out from those nothing leads to, loops included', () => {
  const layout = layoutJourney({
    steps: steps('trigger', 'a', 'lone', 'b', 'x', 'y'),
    transitions: [t('trigger', 'a'), t('lone', 'b'), t('x', 'y'), t('y', 'x'), t('ghost', 'a')],
    entryStepId: 'trigger',
  });
  expect(layout.a).toEqual({ x: 0, y: ROW_GAP });
  expect(layout.lone).toEqual({ x: 0, y: 2 * ROW_GAP });
  expect(layout.b).toEqual({ x: 0, y: 3 * ROW_GAP });
  expect(layout.x).toEqual({ x: 0, y: 4 * ROW_GAP });
  expect(layout.y).toEqual({ x: 0, y: 5 * ROW_GAP });
  expect(Object.keys(layout).sort()).toEqual(['a', 'b', 'lone', 'trigger', 'x', 'y']);
});

test('without a trigger every step still gets a place', () => {
  expect(layoutJourney({ steps: steps('a', 'b'), transitions: [], entryStepId: undefined })).toEqual({
    a: { x: -COLUMN_GAP / 2, y: 0 },
    b: { x: COLUMN_GAP / 2, y: 0 },
  });
});

test('a step added without a drop point goes below the step it follows, or below everything, never on another', () => {
  const placed = [
    { x: 0, y: 0 },
    { x: 0, y: ROW_GAP },
    { x: 300, y: 2 * ROW_GAP },
  ];
  expect(spotBelow(placed)).toEqual({ x: 0, y: 3 * ROW_GAP });
  expect(spotBelow(placed, { x: 0, y: 0 })).toEqual({ x: COLUMN_GAP, y: ROW_GAP });
  expect(spotBelow(placed, { x: 300, y: 2 * ROW_GAP })).toEqual({ x: 300, y: 3 * ROW_GAP });
  expect(spotBelow([])).toEqual({ x: 0, y: 0 });
});
