#include "bench_harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "ops/copy.h"
#include "vulkan/buffer.h"
#include "vulkan/device.h"
#include "vulkan/profile.h"
#include "vulkan/recorder.h"

namespace kvc::bench {
namespace {

using Clock = std::chrono::steady_clock;

// When a row's warm-up may end. The GPU raises its clocks only after sustained load, in steps
// its driver times: after the host had spent about 3 s making a row's inputs (the GPU idle), an
// H200 ran a 32-layer decode step (decode_step_full c=4096) at 2980 us for its first 52 to 98
// runs (155-290 ms) and at 641 us after, its SM clock at 345, then 630, then 1980 MHz
// (nvidia-smi every 20 ms); a 2 s sleep before the row did not help. A warm-up of a fixed 200 ms
// of GPU time ended inside the slow part in a third of the processes, whose timed rounds then
// agreed at 1830-1960 us. So the warm-up lasts until the runs have been no faster for kSettled
// of wall time (and at least kWarmupNs of GPU time in median_us).
class Warmup {
 public:
  // Notes a warm-up run of `run_us` on the GPU; whether the runs may still get faster.
  bool settling(double run_us) {
    const Clock::time_point now = Clock::now();
    if (run_us < fastest_us_ * (1.0 - kGain)) {
      fastest_us_ = run_us;
      faster_at_ = now;
    }
    return now - faster_at_ < kSettled && now - started_ < kLongest;
  }

 private:
  static constexpr double kGain = 0.02;  // faster by less is the runs' own spread
  static constexpr std::chrono::milliseconds kSettled{500};
  static constexpr std::chrono::seconds kLongest{10};  // a bound should the spread keep finding faster runs
  const Clock::time_point started_ = Clock::now();
  Clock::time_point faster_at_ = started_;
  double fastest_us_ = std::numeric_limits<double>::infinity();
};

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

double median_us(Backend& backend, const Timing& timing, const std::function<void()>& record) {
  vk::Recorder& recorder = backend.recorder();
  // Pipelines and caches warm up in the first runs, the clocks only under sustained load: the
  // GPU slows down while the host prepares a row's inputs (up to seconds for the largest), and
  // a few warm-up runs left later memory-bound rows measured at a quarter of their speed on the
  // H100 (L = 32K decode: 59 us first in a process, 225 us after other rows). So the warm-up
  // keeps the GPU busy for at least kWarmupNs of its own time, in submissions of at most
  // kWarmupBatch runs, and until they stop getting faster (Warmup).
  constexpr double kWarmupNs = 200e6;
  // Runs a submission: doubling up to 64, and at most about kWarmupBatchNs of GPU time, so
  // that the warm-up sees each step of the clocks and ends near where they settle.
  constexpr int kWarmupBatch = 64;
  constexpr double kWarmupBatchNs = 100e6;
  double warm_ns = 0;
  constexpr int kMaxWarmupRuns = 100000;  // a bound should the timestamps read zero
  Warmup warmup;
  for (int runs = 0, batch = std::max(1, timing.warmup);; runs += batch) {
    backend.begin();
    const uint32_t from = recorder.timestamp();
    for (int i = 0; i < batch; ++i) record();
    const uint32_t to = recorder.timestamp();
    backend.submit();
    const double batch_ns = recorder.elapsed_ns(from, to);
    warm_ns += batch_ns;
    const double run_ns = batch_ns / batch;
    const bool settling = warmup.settling(run_ns / 1000.0);
    if (runs + batch >= kMaxWarmupRuns || (runs + batch >= timing.warmup && warm_ns >= kWarmupNs && !settling)) break;
    const int batch_by_time = run_ns > 0 ? int(std::min(kWarmupBatchNs / run_ns, double(kWarmupBatch))) : kWarmupBatch;
    batch = std::max(1, std::min({2 * batch, kWarmupBatch, batch_by_time}));
  }
  // Even so, decode at L = 128K timed 460 and 627 us right after its inputs were made and 193 us
  // when timed again at once (H100, decode_sweep, 2026-11-23): the timed runs repeat until two
  // rounds' medians agree within kSteadyTolerance, and the last round is the row's.
  constexpr double kSteadyTolerance = 0.05;
  constexpr int kMaxRounds = 4;
  double previous = 0;
  for (int round = 0;; ++round) {
    backend.begin();
    std::vector<uint32_t> marks{recorder.timestamp()};
    for (int i = 0; i < timing.repetitions; ++i) {
      record();
      marks.push_back(recorder.timestamp());
    }
    backend.submit();
    std::vector<double> times;
    for (size_t i = 1; i < marks.size(); ++i) times.push_back(recorder.elapsed_ns(marks[i - 1], marks[i]) / 1000.0);
    const double current = median(times);
    if (round + 1 == kMaxRounds || (round > 0 && std::abs(current - previous) <= kSteadyTolerance * current)) return current;
    previous = current;
  }
}

WallTime median_wall_us(int repetitions, int max_warmup_runs, const std::function<void()>& prepare,
                        const std::function<RunTimes()>& run) {
  // As in median_us, the GPU's clocks rise only under sustained load: the timed runs follow
  // at least one run (which makes pipelines and scratch memory) and 200 ms of them, until their
  // GPU time stops falling (Warmup; 500 ms where a run reports none).
  const Clock::time_point warm_until = Clock::now() + std::chrono::milliseconds(200);
  Warmup warmup;
  int warmup_runs = 0;
  bool settling = true;
  do {
    if (prepare) prepare();
    settling = warmup.settling(run().gpu_us);
  } while (++warmup_runs < max_warmup_runs && (settling || Clock::now() < warm_until));
  std::vector<double> wall, gpu, record;
  for (int i = 0; i < repetitions; ++i) {
    if (prepare) prepare();
    const Clock::time_point start = Clock::now();
    const RunTimes times = run();
    wall.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    gpu.push_back(times.gpu_us);
    record.push_back(times.record_us);
  }
  return {median(wall), median(gpu), median(record)};
}

double copy_bandwidth_gbps(Backend& backend, const Timing& timing, size_t bytes) {
  Tensor src(backend, bytes), dst(backend, bytes);
  // The faster of the transfer command and a shader copy: the practical ceiling.
  const double transfer_us = median_us(backend, timing, [&] { backend.copy(src, 0, dst, 0, bytes); });
  const double shader_us = median_us(backend, timing, [&] { ops::copy(backend, {view(src), view(dst), bytes}); });
  return 2.0 * bytes / (std::min(transfer_us, shader_us) * 1e3);
}

void record(Report& report, Row row) {
  std::fprintf(stderr, "kvc-bench: %-22s %-62s %-4s %12.1f us", row.name.c_str(), row.shape.c_str(), row.dtype.c_str(),
               row.median_us);
  if (row.max_us > 0) std::fprintf(stderr, " (allocations: min %.1f, max %.1f)", row.min_us, row.max_us);
  std::fprintf(stderr, "\n");
  // Under KVC_PROFILE, what the row's work (set-up, warm-up and timed runs) spent per kernel.
  if (vk::profiling_enabled()) std::fputs(vk::profile_take(row.name + " " + row.shape).c_str(), stderr);
  std::fflush(stderr);
  report.rows.push_back(std::move(row));
}

void print_table(const Report& report, const Report* peer) {
  std::printf("device: %s (%s), %s; measured copy bandwidth %.0f GB/s\n", report.device.c_str(), report.driver.c_str(),
              report.date.c_str(), report.copy_gbps);
  if (!report.matrix_path.empty()) std::printf("matrix path: %s\n", report.matrix_path.c_str());
  const bool gpu_column = std::any_of(report.rows.begin(), report.rows.end(), [](const Row& row) { return row.gpu_us > 0; });
  const bool record_column = std::any_of(report.rows.begin(), report.rows.end(), [](const Row& row) { return row.record_us > 0; });
  std::printf("%-24s %-58s %-5s %11s %11s %8s %8s", "op", "shape", "dtype", "time (us)", "MB moved", "GB/s", "% copy");
  if (gpu_column) std::printf(" %11s %9s", "gpu (us)", "wall/gpu");
  if (record_column) std::printf(" %11s", "record (us)");
  if (peer) std::printf(" %11s %9s", "peer (us)", "peer/kvc");
  std::printf("\n");
  for (const Row& row : report.rows) {
    const double gbps = row.bytes / (row.median_us * 1e3);
    std::printf("%-24s %-58s %-5s %11.1f %11.2f %8.0f %7.1f%%", row.name.c_str(), row.shape.c_str(), row.dtype.c_str(),
                row.median_us, row.bytes / 1e6, gbps, 100.0 * gbps / report.copy_gbps);
    if (gpu_column) {
      if (row.gpu_us > 0) std::printf(" %11.1f %8.2fx", row.gpu_us, row.median_us / row.gpu_us);
      else std::printf(" %11s %9s", "-", "-");
    }
    if (record_column) {
      if (row.record_us > 0) std::printf(" %11.1f", row.record_us);
      else std::printf(" %11s", "-");
    }
    if (peer) {
      const auto match = std::find_if(peer->rows.begin(), peer->rows.end(), [&](const Row& p) {
        return p.name == row.name && p.shape == row.shape && p.dtype == row.dtype;
      });
      if (match != peer->rows.end()) std::printf(" %11.1f %8.2fx", match->median_us, match->median_us / row.median_us);
      else std::printf(" %11s %9s", "-", "-");
    }
    if (row.max_us > 0) std::printf("  allocations: min %.1f, max %.1f", row.min_us, row.max_us);
    std::printf("\n");
  }
}

std::string to_json(const Report& report) {
  std::ostringstream out;
  out << "{\n  \"device\": \"" << report.device << "\",\n  \"driver\": \"" << report.driver
      << "\",\n  \"matrix_path\": \"" << report.matrix_path << "\",\n  \"date\": \""
      << report.date << "\",\n  \"copy_gbps\": " << report.copy_gbps << ",\n  \"rows\": [\n";
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const Row& row = report.rows[i];
    const double gbps = row.bytes / (row.median_us * 1e3);
    out << "    {\"name\": \"" << row.name << "\", \"shape\": \"" << row.shape << "\", \"dtype\": \"" << row.dtype
        << "\", \"us\": " << row.median_us << ", \"bytes\": " << row.bytes << ", \"gbps\": " << gbps
        << ", \"pct_copy\": " << 100.0 * gbps / report.copy_gbps;
    if (row.gpu_us > 0) out << ", \"gpu_us\": " << row.gpu_us;
    if (row.record_us > 0) out << ", \"record_us\": " << row.record_us;
    if (row.max_us > 0) out << ", \"min_us\": " << row.min_us << ", \"max_us\": " << row.max_us;
    out << "}" << (i + 1 < report.rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  return out.str();
}

Report read_json(const std::string& path) {
  std::ifstream file(path);
  require(file.good(), KVC_ERROR_INVALID_ARGUMENT, "cannot read " + path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string json = text.str();
  Report report;
  std::smatch device;
  if (std::regex_search(json, device, std::regex("\"device\"\\s*:\\s*\"([^\"]*)\""))) report.device = device[1];
  const std::regex row_pattern(
      "\\{\\s*\"name\"\\s*:\\s*\"([^\"]*)\"\\s*,\\s*\"shape\"\\s*:\\s*\"([^\"]*)\"\\s*,\\s*\"dtype\"\\s*:\\s*\"([^\"]*)\"\\s*,\\s*\"us\"\\s*:\\s*([0-9.eE+-]+)");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), row_pattern); it != std::sregex_iterator(); ++it) {
    Row row;
    row.name = (*it)[1];
    row.shape = (*it)[2];
    row.dtype = (*it)[3];
    row.median_us = std::stod((*it)[4]);
    report.rows.push_back(row);
  }
  return report;
}

}  // namespace kvc::bench
