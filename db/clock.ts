/**
 * What time it is, for rules that count within a window of time (the API's rate limit, sign-in and
 * account-mail attempts). The service passes the system clock; a test passes one it moves, so a
 * window's end is a step of the test rather than a wait.
 */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
