"""bench/mlx_kernel_floor.py: Nsight Compute's CSV read, launches told apart, the floor's fraction."""

import importlib.util
import os
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
spec = importlib.util.spec_from_file_location("mlx_kernel_floor", os.path.join(ROOT, "bench", "mlx_kernel_floor.py"))
floor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(floor)

HEAD = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'


def details(launches):
    """ncu's details layout: the program's own output and ncu's notes first, a row per metric."""
    rows = ['{"graphs": "0"}', "==PROF== Connected to process 123", HEAD]
    for i, (name, ns, read, write, *block) in enumerate(launches):
        block = block[0] if block else 256
        for metric, unit, value in (("dram__bytes_read.sum", "byte", read), ("dram__bytes_write.sum", "byte", write),
                                    ("gpu__time_duration.sum", "ns", ns)):
            rows.append(f'"{i}","123","python3","h","{name}","1","7","({block}, 1, 1)","(64, 1, 1)","0","9.0",'
                        f'"Command line profiler metrics","{metric}","{unit}","{value:,}"')
    return "\n".join(rows)


STATE = 2 * 16 * 2048 * 16 * 4


class KernelFloor(unittest.TestCase):
    def test_the_fraction_is_the_copy_s_time_over_the_batch_16_update_s(self):
        runs = ([("custom_kernel_floor_copy_f32", 2000, STATE // 2, STATE // 2)] * 3
                + [("custom_kernel_state_update_tpc1_v4", 1500, STATE // 32 + 1000, 9000)] * 5
                + [("custom_kernel_state_update_tpc1_v4", 4000, STATE // 2 + 5000, STATE // 4)] * 5
                + [("custom_kernel_floor_hbm_copy_f32", 160_000, 2**28, 2**27)] * 3
                + [("some_other_kernel", 10, 1, 1)])
        out = floor.summary(floor.launches(details(runs)), rated_gb_per_s=4800.0, hbm_bytes=2**28)
        self.assertEqual(out["copy"]["launches"], 3)
        self.assertEqual(out["state_update_b1"]["launches"], 5)
        self.assertEqual(out["state_update_b16"]["launches"], 5)
        self.assertEqual(out["state_update_b16"]["median_ns"], 4000)
        self.assertAlmostEqual(out["floor"]["b16_fraction_of_floor"], 0.5)
        self.assertAlmostEqual(out["floor"]["copy_gb_per_s"], STATE / 2000)
        self.assertAlmostEqual(out["floor"]["b16_fraction_of_rated_floor"], STATE / 4800 / 4000)
        # The large copy is its own kind (its name holds "floor_" and "copy" too), read and written.
        self.assertEqual(out["hbm_copy"]["launches"], 3)
        self.assertAlmostEqual(out["hbm"]["gb_per_s"], 2 * 2**28 / 160_000)

    def test_points_of_the_space_are_told_apart_by_kernel_and_block(self):
        # The export (tpc1_v4, 128 threads) and two more points at batch 16; batch 1 is no point.
        b16 = STATE // 2
        runs = ([("custom_kernel_floor_copy_131072(const float *, float *)", 4000, b16, b16)] * 3
                + [("custom_kernel_state_update_tpc1_v4_2048_16(const float *)", 1500, STATE // 32, 9000, 128)] * 3
                + [("custom_kernel_state_update_tpc1_v4_2048_16(const float *)", 6000, b16, b16, 128)] * 3
                + [("custom_kernel_state_update_tpc4_v4_2048_16(const float *)", 5000, b16, b16, 128)] * 3
                + [("custom_kernel_state_update_tpc4_v4_2048_16(const float *)", 5500, b16, b16, 256)] * 3)
        out = floor.summary(floor.launches(details(runs)))
        got = [(p["kernel"], p["block"], p["median_ns"], p["launches"]) for p in out["points"]]
        self.assertEqual(got, [("custom_kernel_state_update_tpc4_v4_2048_16", "(128, 1, 1)", 5000, 3),
                               ("custom_kernel_state_update_tpc4_v4_2048_16", "(256, 1, 1)", 5500, 3),
                               ("custom_kernel_state_update_tpc1_v4_2048_16", "(128, 1, 1)", 6000, 3)])
        self.assertAlmostEqual(out["points"][0]["fraction_of_floor"], 0.8)
        # The headline is the export's: its kernel and block size, as at batch 1.
        self.assertEqual(out["state_update_b16"]["median_ns"], 6000)
        self.assertEqual(out["state_update_b16"]["launches"], 3)
        # Without other points there is no table.
        self.assertNotIn("points", floor.summary(floor.launches(details(runs[:9]))))

    def test_the_raw_layout_reads_the_same(self):
        head = '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"'
        rows = [head, '"","","byte","byte","ns"']
        rows += [f'"{i}","floor_copy","{STATE // 2}","{STATE // 2}","2,000"' for i in range(2)]
        rows += [f'"{2 + i}","state_update","{STATE // 2}","{STATE // 2}","2,500"' for i in range(2)]
        out = floor.summary(floor.launches("\n".join(rows)))
        self.assertAlmostEqual(out["floor"]["b16_fraction_of_floor"], 0.8)
        self.assertNotIn("rated_floor_ns", out["floor"])
        self.assertNotIn("hbm", out)

    def test_a_profile_without_the_copy_or_the_update_says_what_it_found(self):
        with self.assertRaisesRegex(SystemExit, "found kernels.*floor_copy"):
            floor.summary(floor.launches(details([("floor_copy", 1, 2, 3)])))
        with self.assertRaisesRegex(SystemExit, "no Nsight Compute CSV header"):
            floor.launches("==PROF== no kernels were profiled")


if __name__ == "__main__":
    unittest.main()
