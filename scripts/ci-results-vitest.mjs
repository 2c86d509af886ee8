// A vitest reporter (vitest ≥ 3: onTestRunEnd) that records a vitest run's pass count as one
// result for the compatibility table (scripts/ci-results.mjs), for the CI steps that are a
// vitest run (.ci/node.sh, .ci/node-pg.sh):
//
//   RUNLOG_CI_RECORD_AS='{"source":".ci/node.sh","line":"5.0.0-beta.35","world":"runlog","feature":"…"}' \
//     npx vitest run --reporter="$PWD/scripts/ci-results-vitest.mjs" --reporter=default
//
// ok: every test passed (none failed, skipped or left pending) and the run ended "passed";
// pass/tests: the passed tests and all of them. Prints nothing; records nothing unless both
// RUNLOG_CI_RESULTS and RUNLOG_CI_RECORD_AS are set.
import { record } from './ci-results.mjs';

export default class CiResultsReporter {
  onTestRunEnd(testModules, unhandledErrors, reason) {
    const as = process.env.RUNLOG_CI_RECORD_AS;
    if (!as || !process.env.RUNLOG_CI_RESULTS) return;
    const states = {};
    for (const m of testModules) for (const t of m.children.allTests()) states[t.result().state] = (states[t.result().state] ?? 0) + 1;
    const tests = Object.values(states).reduce((a, b) => a + b, 0);
    const pass = states.passed ?? 0;
    const ok = reason === 'passed' && tests > 0 && pass === tests && unhandledErrors.length === 0;
    const why = `run ${reason}; ${Object.entries(states).map(([k, n]) => `${n} ${k}`).join(', ') || 'no tests'}`;
    record({ ...JSON.parse(as), ok, pass, tests, ...(!ok && { detail: `${why}${unhandledErrors.length ? `, ${unhandledErrors.length} unhandled errors` : ''}` }) });
  }
}
