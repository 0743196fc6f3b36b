#!/usr/bin/env python3
"""Tests of the figures that `report.py --across` derives from records, on records written here
with round numbers, so that each expected value follows from its definition by hand.

    python3 -m unittest discover -s benches -p report_test.py
"""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest

import report

HEADER = """# unix time: 1796161159
# commit: 0123abc
# cpu: {cpu}
# cpus: {cpus}
# rounds: 41 x 2000000 calls
# filters: []
# name\ta_ns\tb_ns\tratio\tq1\tq3
"""


def row(name, a, b, ratio):
    return f"{name}\t{a}\t{b}\t{ratio}\t{ratio}\t{ratio}\n"


# A run with every row that the derived figures read. A row's recorded ratio is the median of
# per-round ratios, not its two median times' quotient, so the ratios here differ from A / B, and
# each figure below comes out differently if read from the wrong column. Over a million keys a
# check takes 120 ns against governor's 200 (ratio 0.61), with Zipf(1.0) keys 110 against 190
# (0.57), and a dependent read 100 ns (ratio 1.25).
# Between work (100 ns alone) tollgate's check takes 200 ns (ratio 2.1), governor's 300 (3.0), with
# prefetch_key first 150 (1.55), the floor's 170 (1.8).
ROWS = (
    row("keyed 1M uniform: tollgate / governor", 120, 200, 0.61)
    + row("keyed 1M uniform: tollgate / one DRAM access", 120, 100, 1.25)
    + row("keyed 1M zipf: tollgate / governor", 110, 190, 0.57)
    + row("keyed 1M uniform: between other work, tollgate / the work alone", 200, 100, 2.1)
    + row("keyed 1M uniform: between other work, governor / the work alone", 300, 100, 3.0)
    + row("keyed 1M uniform: between other work, prefetch_key first / the work alone", 150, 100, 1.55)
    + row("keyed 1M uniform: between other work, four-line floor / the work alone", 170, 100, 1.8)
)


class Figures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "run.tsv")
        with open(self.path, "w") as f:
            f.write(HEADER.format(cpu="AMD EPYC (family 26, model 2)", cpus=2) + ROWS)
        self.header, rows = report.read_record(self.path)
        self.rows = report.by_name(rows)

    def tearDown(self):
        self.dir.cleanup()

    def figure(self, label):
        (found,) = [figure for name, figure in report.FIGURES if name == label]
        return found(self.rows)

    def test_a_row_ratio_is_the_recorded_median(self):
        # Not A / B (0.6 and 1.2).
        self.assertEqual(self.figure("1M keys: check_key's time over governor's"), 0.61)
        self.assertEqual(self.figure("1M keys: check_key's time in dependent reads"), 1.25)
        # Zipf(1.0) keys' own row, not the uniform keys' (0.61).
        self.assertEqual(self.figure("1M Zipf(1.0) keys: check_key's time over governor's"), 0.57)

    def test_governor_in_dependent_reads_is_its_time_over_the_reads(self):
        # 200 ns over 100 ns (the ratios would give 1.25 / 0.61, 2.05).
        self.assertAlmostEqual(self.figure("1M keys: governor's time in dependent reads"), 2.0)

    def test_added_time_is_over_what_governor_adds(self):
        # From the ratios: (2.1 - 1) / (3.0 - 1), (1.55 - 1) / (3.0 - 1), (1.8 - 1) / (3.0 - 1), and
        # 0.55 over 0.4 (the times would give 0.5, 0.25, 0.35 and 1.43).
        self.assertAlmostEqual(self.figure("1M keys, between work: a check's added time over governor's"), 0.55)
        self.assertAlmostEqual(self.figure("1M keys, between work: with prefetch_key, over governor's"), 0.275)
        self.assertAlmostEqual(self.figure("1M keys, between work: the four-line floor's, over governor's"), 0.4)
        self.assertAlmostEqual(self.figure("1M keys, between work: a check's added time over the floor's"), 1.375)

    def test_added_time_in_dependent_reads(self):
        # From the times: 200 - 100 ns over a 100 ns read, and governor's 300 - 100 (the ratios, as
        # multiples of the work's time, would give 1.1 for tollgate).
        self.assertAlmostEqual(self.figure("1M keys, between work: a check's added time in dependent reads"), 1.0)
        self.assertAlmostEqual(self.figure("1M keys, between work: governor's added time in dependent reads"), 2.0)

    def test_a_figure_whose_rows_the_run_lacks_is_absent(self):
        self.assertIsNone(self.figure("100k keys: check_key's time over governor's"))
        del self.rows["keyed 1M uniform: tollgate / one DRAM access"]
        self.assertIsNone(self.figure("1M keys: governor's time in dependent reads"))

    def test_an_added_time_over_none_is_absent(self):
        # Governor's row at 1.0 (noise can give it, or less): no quotient over governor's, and no
        # division by zero; the floor's own figure over governor's goes with them.
        between = "keyed 1M uniform: between other work, "
        self.rows[between + "governor / the work alone"] = (100, 100, 1.0)
        for label in ("a check's added time over governor's", "with prefetch_key, over governor's",
                      "the four-line floor's, over governor's"):
            self.assertIsNone(self.figure("1M keys, between work: " + label))
        # The floor's row at 0.98 with governor's as before (3.0): the floor's figure over
        # governor's is -0.01, and a check's over the floor's is absent, not -55.
        self.rows[between + "governor / the work alone"] = (300, 100, 3.0)
        self.rows[between + "four-line floor / the work alone"] = (98, 100, 0.98)
        self.assertAlmostEqual(self.figure("1M keys, between work: the four-line floor's, over governor's"), -0.01)
        self.assertIsNone(self.figure("1M keys, between work: a check's added time over the floor's"))
        self.assertAlmostEqual(self.figure("1M keys, between work: a check's added time over governor's"), 0.55)

    def test_records_group_by_core_and_cpu_count(self):
        self.assertEqual(report.core_of(self.header), "Zen 5, 2 CPUs")
        intel = {"cpu": "Intel(R) Xeon(R) Processor (family 6, model 207)", "cpus": "16"}
        self.assertEqual(report.core_of(intel), "Emerald Rapids, 16 CPUs")
        guest = {"cpu": "Intel(R) Xeon(R) Processor (family 6, model 167)", "cpus": "2"}
        self.assertEqual(report.core_of(guest), "Sapphire Rapids (model 167), 2 CPUs")
        unknown = {"cpu": "Some CPU (family 99, model 1)", "cpus": "4"}
        self.assertEqual(report.core_of(unknown), "Some CPU (family 99, model 1), 4 CPUs")

    def test_across_prints_least_median_and_most_per_core(self):
        # A second run on the same core, slower: 0.8 over a million keys; a third, 0.7.
        for name, ratio in (("b.tsv", 0.8), ("c.tsv", 0.7)):
            with open(os.path.join(self.dir.name, name), "w") as f:
                f.write(HEADER.format(cpu="AMD EPYC (family 26, model 2)", cpus=2)
                        + row("keyed 1M uniform: tollgate / governor", 1, 1, ratio))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            report.across_report(self.dir.name, "check_key's time over governor's", each=False)
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "Zen 5, 2 CPUs: 3 records")
        self.assertEqual(lines[1].split()[-4:], ["3", "0.610", "0.700", "0.800"])

    def test_across_options_without_across_are_refused(self):
        # Not ignored in favour of the criterion report: argparse's usage error, exit status 2.
        for option in (["--each"], ["--figure", "dependent reads"]):
            run = subprocess.run([sys.executable, report.__file__, *option], capture_output=True, text=True)
            self.assertEqual(run.returncode, 2)
            self.assertIn("--figure and --each go with --across", run.stderr)


if __name__ == "__main__":
    unittest.main()
