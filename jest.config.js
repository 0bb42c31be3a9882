/**
 * `npm test` (test/run.sh) runs the suite in two lanes: most files two at a time (the machine was
 * idle half of a one-at-a-time run: the files mostly wait on Temporal, PostgreSQL and timers), then
 * the files below one at a time. TEST_LANE picks a lane; unset, every file (e.g. `npx jest <file>`).
 */
const ALONE = [
  // Their own Temporal server on PostgreSQL, and in topology four service processes: together
  // with another file's pools they would near PostgreSQL's 100 connections.
  'test/service/topology.test.ts',
  'test/service/temporal-postgres.test.ts',
];

const lane = process.env.TEST_LANE;
if (lane !== undefined && lane !== 'shared' && lane !== 'alone') throw new Error(`TEST_LANE must be shared or alone, not ${lane}`);
const alone = ALONE.map((file) => `<rootDir>/${file}`);

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: lane === 'alone' ? alone : ['**/*.test.ts'],
  testPathIgnorePatterns: lane === 'shared' ? ['/node_modules/', ...ALONE.map((file) => `/${file.replace(/\./g, '\\.')}$`)] : ['/node_modules/'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] },
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  testTimeout: 60000,
};
