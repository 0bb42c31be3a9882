import { useEffect, useState } from 'react';

/**
 * The value once it has stopped changing for `ms`, so a search or a preview asks the service when
 * typing pauses rather than at every key. Compared as is: pass text, not a new object each render.
 */
export function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}
