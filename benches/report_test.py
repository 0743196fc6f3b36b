#!/usr/bin/env python3
"""Tests of the figures that `report.py --across` derives from records, on records written here
with round numbers, so that each expected value follows from its definition by hand.

    python3 -m unittest discover -s benches -p report_test.py
"""
import contextlib
import io
import os
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


# A run with every row that the derived figures read: a check over a million keys takes 120 ns
# against governor's 200, and a dependent read 100; between work (100 ns alone) tollgate's check
# makes it 2.0 times as long, governor's 3.0, with prefetch_key 1.5, the floor's 1.8.
ROWS = (
    row("keyed 1M uniform: tollgate / governor", 120, 200, 0.6)
    + row("keyed 1M uniform: tollgate / one DRAM access", 120, 100, 1.2)
    + row("keyed 1M uniform: between other work, tollgate / the work alone", 200, 100, 2.0)
    + row("keyed 1M uniform: between other work, governor / the work alone", 300, 100, 3.0)
    + row("keyed 1M uniform: between other work, prefetch_key first / the work alone", 150, 100, 1.5)
    + row("keyed 1M uniform: between other work, four-line floor / the work alone", 180, 100, 1.8)
)


def records(rows):
    return {name: (a, b, ratio) for name, a, b, ratio, _, _ in rows}


class Figures(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "run.tsv")
        with open(self.path, "w") as f:
            f.write(HEADER.format(cpu="AMD EPYC (family 26, model 2)", cpus=2) + ROWS)
        self.header, rows = report.read_record(self.path)
        self.rows = records(rows)

    def tearDown(self):
        self.dir.cleanup()

    def figure(self, label):
        (found,) = [figure for name, figure in report.FIGURES if name == label]
        return found(self.rows)

    def test_a_row_ratio_is_the_recorded_median(self):
        self.assertEqual(self.figure("1M keys: check_key's time over governor's"), 0.6)

    def test_governor_in_dependent_reads_is_its_time_over_the_reads(self):
        # 200 ns over 100 ns.
        self.assertAlmostEqual(self.figure("1M keys: governor's time in dependent reads"), 2.0)

    def test_added_time_is_over_what_governor_adds(self):
        # (2.0 - 1) / (3.0 - 1), (1.5 - 1) / (3.0 - 1), (1.8 - 1) / (3.0 - 1).
        self.assertAlmostEqual(self.figure("1M keys, between work: a check's added time over governor's"), 0.5)
        self.assertAlmostEqual(self.figure("1M keys, between work: with prefetch_key, over governor's"), 0.25)
        self.assertAlmostEqual(self.figure("1M keys, between work: the four-line floor's, over governor's"), 0.4)
        # 0.5 over 0.4.
        self.assertAlmostEqual(self.figure("1M keys, between work: a check's added time over the floor's"), 1.25)

    def test_added_time_in_dependent_reads(self):
        # 200 - 100 ns over a 100 ns read; governor's 300 - 100.
        self.assertAlmostEqual(self.figure("1M keys, between work: a check's added time in dependent reads"), 1.0)
        self.assertAlmostEqual(self.figure("1M keys, between work: governor's added time in dependent reads"), 2.0)

    def test_a_figure_whose_rows_the_run_lacks_is_absent(self):
        self.assertIsNone(self.figure("100k keys: check_key's time over governor's"))
        del self.rows["keyed 1M uniform: tollgate / one DRAM access"]
        self.assertIsNone(self.figure("1M keys: governor's time in dependent reads"))

    def test_records_group_by_core_and_cpu_count(self):
        self.assertEqual(report.core_of(self.header), "Zen 5, 2 CPUs")
        intel = {"cpu": "Intel(R) Xeon(R) Processor (family 6, model 207)", "cpus": "16"}
        self.assertEqual(report.core_of(intel), "Emerald Rapids, 16 CPUs")
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
        self.assertEqual(lines[1].split()[-4:], ["3", "0.600", "0.700", "0.800"])


if __name__ == "__main__":
    unittest.main()
