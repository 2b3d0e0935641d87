/** The most rows one page of a listing holds (CLI, and the admin API to come), whatever is asked. */
export const MAX_PAGE_SIZE = 500;
export const DEFAULT_PAGE_SIZE = 100;
