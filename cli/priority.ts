import { readdirSync } from 'node:fs';
import os from 'node:os';

/**
 * Lowers this process's CPU priority by `niceness` (docs/configuration.md, WORKER_NICENESS). On
 * Linux each thread has a nice value of its own, inherited by the threads it starts: every thread
 * running now is lowered, so the ones started later (Temporal's, the workflow threads) are too.
 */
export function lowerPriority(niceness: number): void {
  if (niceness === 0) return;
  let threads: number[];
  try {
    threads = readdirSync('/proc/self/task').map(Number);
  } catch {
    threads = [0]; // no /proc: elsewhere the priority is the whole process's
  }
  for (const tid of threads) {
    try {
      os.setPriority(tid, Math.min(19, os.getPriority(tid) + niceness));
    } catch {
      // the thread ended meanwhile
    }
  }
}
