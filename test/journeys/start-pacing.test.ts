import { StartPacing } from '../../temporal/triggers/start-pacing';

/** The trigger dispatcher's lanes (temporal/triggers/start-pacing.ts): all of them while the worker takes journeys as they start. */

const lanes = (pacing: StartPacing) => [0, 1, 7].map((i) => pacing.admits(i));

test('every lane goes on while starts are eager, one alone after a start that waits in the queue, all again after an eager one', () => {
  const pacing = new StartPacing();
  expect(lanes(pacing)).toEqual([true, true, true]);
  pacing.observe({ eager: 1, queued: 0 });
  expect(lanes(pacing)).toEqual([true, true, true]);
  pacing.observe({ eager: 0, queued: 1 });
  expect(lanes(pacing)).toEqual([true, false, false]);
  // An event that started nothing (it only signalled, the entry rule refused, a repeat) changes nothing.
  pacing.observe({ eager: 0, queued: 0 });
  expect(lanes(pacing)).toEqual([true, false, false]);
  pacing.observe({ eager: 1, queued: 1 });
  expect(lanes(pacing)).toEqual([true, false, false]);
  pacing.observe({ eager: 1, queued: 0 });
  expect(lanes(pacing)).toEqual([true, true, true]);
});

test('a server that has started nothing eagerly (eager start switched off) keeps every lane going', () => {
  const pacing = new StartPacing();
  for (let i = 0; i < 3; i++) pacing.observe({ eager: 0, queued: 1 });
  expect(lanes(pacing)).toEqual([true, true, true]);
});
