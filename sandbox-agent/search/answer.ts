import { byScore, runJob, type FindResult, type FuzzyResult, type GrepResult, type SearchJob } from "./jobs.js";

/**
 * A search's answer as it crosses from its worker: the matches already JSON
 * (one string crosses the thread boundary, not thousands of objects), the
 * rest as fields. The agent joins the answers of a shared walk by
 * concatenating those strings: no parse and no second stringify of the
 * biggest answers (a find of 20,000 files is a megabyte of JSON).
 */
export interface PackedAnswer {
  /** The matches as a JSON array, `[]` for none. */
  matches: string;
  count: number;
  truncated: boolean;
  unreadable: number;
}

export function packAnswer(result: FindResult | FuzzyResult | GrepResult): PackedAnswer {
  const matches = result.matches ?? [];
  return { matches: JSON.stringify(matches), count: matches.length, truncated: result.truncated === true, unreadable: result.unreadable ?? 0 };
}

/**
 * A walk cut into shares (contiguous runs of the directory's entries) that
 * the workers claim one at a time through a shared counter: a worker the
 * machine slows down leaves the rest of the walk to the others, with no
 * round trip through the agent's thread between shares.
 */
export interface SharedWalk {
  topLevel: string[][];
  /** An Int32 counter: the next share to claim. */
  claim: SharedArrayBuffer;
}

/** One share's answer; `share` is its place in walk order. */
export interface ShareAnswer {
  share: number;
  answer: PackedAnswer;
}

/** Runs the job (or, given a shared walk, the shares this worker claims until none is left). */
export function runShares(job: SearchJob, walk: SharedWalk | undefined, cancelled: () => boolean): ShareAnswer[] {
  if (!walk) return [{ share: 0, answer: packAnswer(runJob(job, cancelled)) }];
  const claim = new Int32Array(walk.claim);
  const answers: ShareAnswer[] = [];
  for (let share = Atomics.add(claim, 0, 1); share < walk.topLevel.length; share = Atomics.add(claim, 0, 1)) {
    answers.push({ share, answer: packAnswer(runJob({ ...job, topLevel: walk.topLevel[share], firstShare: share === 0 }, cancelled)) });
  }
  return answers;
}

/**
 * JSON arrays as one array with the elements of all, joined once (slicing a
 * concatenation would copy it again for every further array).
 */
function concatArrays(arrays: string[]): string {
  const nonEmpty = arrays.filter((a) => a !== "[]");
  if (nonEmpty.length <= 1) return nonEmpty[0] ?? "[]";
  return `[${nonEmpty.map((a) => a.slice(1, -1)).join(",")}]`;
}

type Match = { path: string; score?: number };

/** The answers of every worker that took part in a walk, in share order, as one reply. */
export function joinShares(job: SearchJob, parts: ShareAnswer[][]): string {
  return joinAnswers(
    job,
    parts
      .flat()
      .sort((a, b) => a.share - b.share)
      .map((a) => a.answer),
  );
}

/**
 * The answers of a walk's shares (in walk order) as one reply, in the
 * reference's field order: walk order for find and grep, best score first
 * for a fuzzy search, cut at the limit.
 */
function joinAnswers(job: SearchJob, answers: PackedAnswer[]): string {
  const limit = job.options.limit;
  let count = answers.reduce((n, a) => n + a.count, 0);
  let truncated = answers.some((a) => a.truncated);
  let matches: string;
  if (job.kind === "fuzzy" && answers.length > 1) {
    const all = answers.flatMap((a) => JSON.parse(a.matches) as Match[]);
    all.sort((a, b) => byScore(a as Required<Match>, b as Required<Match>));
    if (all.length > limit) all.length = limit;
    matches = JSON.stringify(all);
  } else if (count > limit) {
    // Rare (a cut share): only then are the matches parsed, to keep the first `limit` in walk order.
    const all = answers.flatMap((a) => JSON.parse(a.matches) as Match[]).slice(0, limit);
    matches = JSON.stringify(all);
  } else {
    matches = concatArrays(answers.map((a) => a.matches));
  }
  if (count > limit) {
    count = limit;
    truncated = true;
  }
  const unreadable = answers.reduce((n, a) => n + a.unreadable, 0);
  const meta = `"total":${count}${truncated ? ',"truncated":true' : ""}${unreadable ? `,"unreadable":${unreadable}` : ""}`;
  // Grep answers `matches: null` for nothing, as the reference does.
  if (job.kind === "grep") return `{"query":${JSON.stringify(job.options.query)},"matches":${count ? matches : "null"},${meta}}`;
  return `{"matches":${matches},${meta}}`;
}
