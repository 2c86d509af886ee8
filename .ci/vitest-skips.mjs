// usage: node .ci/vitest-skips.mjs REPORT.json WHY
// Appends one line "skipped: <file> > <test>: <WHY>" per test that a vitest JSON report
// (--reporter=json --outputFile.json=REPORT.json) lists as not run (skipped, pending, todo)
// to the file RUNLOG_SKIP_LOG, which .ci/run counts at the end, and prints the lines.
// vitest does not say why a test skipped itself; WHY names the run it was part of.
import { appendFileSync, readFileSync } from 'node:fs';
import path from 'node:path';

const [report, why] = process.argv.slice(2);
if (!report || !why) {
  console.error('usage: node .ci/vitest-skips.mjs REPORT.json WHY');
  process.exit(2);
}
const { testResults } = JSON.parse(readFileSync(report, 'utf8'));
const lines = [];
for (const file of testResults) {
  for (const test of file.assertionResults) {
    if (test.status !== 'passed' && test.status !== 'failed') {
      lines.push(`skipped: ${path.relative(process.cwd(), file.name)} > ${test.fullName}: ${why}`);
    }
  }
}
if (lines.length > 0) {
  if (process.env.RUNLOG_SKIP_LOG) appendFileSync(process.env.RUNLOG_SKIP_LOG, `${lines.join('\n')}\n`);
  console.log(lines.join('\n'));
}
