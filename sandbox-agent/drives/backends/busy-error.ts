/** The mount is in use (EBUSY); the reason is the unmount program's own words. Its own file: pinned-mount.ts and the backends both throw it. */
export class DriveBusyError extends Error {}
