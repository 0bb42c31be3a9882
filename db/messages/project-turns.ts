/**
 * Emails waiting to be sent, taken one project at a time in turn and oldest first within each: a
 * project with thousands waiting delays another's next email by one email, not by its thousands.
 * What a delivery round claimed waits in one, and so does what the API handed off.
 */
export class ProjectTurns<T> {
  /** In turn order: a project goes to the back once one of its items is taken. */
  private readonly byProject = new Map<string, T[]>();
  length = 0;

  constructor(private readonly projectOf: (item: T) => string) {}

  push(...items: T[]): void {
    for (const item of items) {
      const project = this.projectOf(item);
      const mine = this.byProject.get(project);
      if (mine) mine.push(item);
      else this.byProject.set(project, [item]);
    }
    this.length += items.length;
  }

  shift(): T | undefined {
    const first = this.byProject.entries().next();
    if (first.done) return undefined;
    const [project, mine] = first.value;
    const next = mine.shift()!;
    this.byProject.delete(project);
    if (mine.length > 0) this.byProject.set(project, mine);
    this.length -= 1;
    return next;
  }

  /** Takes every item out. */
  drain(): T[] {
    const all = this.items();
    this.byProject.clear();
    this.length = 0;
    return all;
  }

  items(): T[] {
    return [...this.byProject.values()].flat();
  }
}
