// LatencyHistogram: a fixed, lock-free latency histogram for hot paths. Buckets are powers of
// two in microseconds: bucket 0 counts [0, 1) µs, bucket i counts [2^(i-1), 2^i) µs, the last
// one everything from 2^(kBuckets-2) µs (about 71 minutes) up. Recording is two relaxed atomic
// adds; a snapshot is a copy of the counters (not one instant across buckets, which is fine for
// monitoring). Quantiles are estimated at a bucket's upper bound: within a factor of 2.
//
//   LatencyHistogram h;
//   h.record(std::chrono::microseconds(340));
//   HistogramSnapshot s = h.snapshot();      // s.count == 1, s.quantile(0.99) == 512us
//
// Thread safety: record() and snapshot() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace lockstep {

inline constexpr std::size_t kHistogramBuckets = 34;

struct HistogramSnapshot {
    std::array<std::uint64_t, kHistogramBuckets> buckets{};
    std::uint64_t count = 0;
    std::uint64_t sum_us = 0;

    // The upper bound of bucket i in microseconds (the last bucket: the largest finite bound).
    static std::uint64_t upper_bound_us(std::size_t i);
    // Estimated q-quantile (0 < q <= 1) in microseconds: the upper bound of the bucket holding
    // it; 0 when empty.
    std::uint64_t quantile_us(double q) const;
    double mean_us() const { return count == 0 ? 0.0 : static_cast<double>(sum_us) / static_cast<double>(count); }
};

// "count=12 mean=310us p50=256us p99=1024us max<=2048us".
std::string to_string(const HistogramSnapshot& s);

class LatencyHistogram {
public:
    void record(std::chrono::nanoseconds elapsed) noexcept;
    HistogramSnapshot snapshot() const noexcept;

private:
    std::array<std::atomic<std::uint64_t>, kHistogramBuckets> buckets_{};
    std::atomic<std::uint64_t> sum_us_{0};
};

// Records the time from construction to destruction into `h` (nullptr: nothing).
class ScopedLatency {
public:
    explicit ScopedLatency(LatencyHistogram* h) noexcept : h_(h), start_(std::chrono::steady_clock::now()) {}
    ~ScopedLatency() {
        if (h_ != nullptr) h_->record(std::chrono::steady_clock::now() - start_);
    }
    ScopedLatency(const ScopedLatency&) = delete;
    ScopedLatency& operator=(const ScopedLatency&) = delete;
    // Stops without recording (the operation turned out to be another kind).
    void cancel() noexcept { h_ = nullptr; }

private:
    LatencyHistogram* h_;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace lockstep
