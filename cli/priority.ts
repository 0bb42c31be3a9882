import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
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
  // With the kernel's autogroups, sessions share the CPU first and a thread's nice value counts only
  // within its session. A worker that leads a session of its own (as under `tidings start` or
  // systemd) lowers its session's; in a session it shares with others, only its own threads.
  if (leadsSession()) {
    try {
      writeFileSync('/proc/self/autogroup', String(niceness));
    } catch {
      // no autogroups here
    }
  }
}

function leadsSession(): boolean {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]) === process.pid;
  } catch {
    return false;
  }
}
