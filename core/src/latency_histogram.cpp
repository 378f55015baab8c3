#include "lockstep/core/latency_histogram.h"

#include <bit>

namespace lockstep {

namespace {

std::size_t bucket_of(std::uint64_t us) {
    if (us == 0) return 0;
    const auto width = static_cast<std::size_t>(std::bit_width(us));  // us in [2^(w-1), 2^w)
    return width < kHistogramBuckets ? width : kHistogramBuckets - 1;
}

}  // namespace

std::uint64_t HistogramSnapshot::upper_bound_us(std::size_t i) {
    if (i >= kHistogramBuckets - 1) i = kHistogramBuckets - 2;
    return std::uint64_t{1} << i;
}

std::uint64_t HistogramSnapshot::quantile_us(double q) const {
    if (count == 0) return 0;
    if (q <= 0) q = 0;
    if (q > 1) q = 1;
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count));
    if (rank == 0) rank = 1;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kHistogramBuckets; ++i) {
        seen += buckets[i];
        if (seen >= rank) return upper_bound_us(i);
    }
    return upper_bound_us(kHistogramBuckets - 1);
}

std::string to_string(const HistogramSnapshot& s) {
    std::uint64_t max_bound = 0;
    for (std::size_t i = 0; i < kHistogramBuckets; ++i) {
        if (s.buckets[i] != 0) max_bound = HistogramSnapshot::upper_bound_us(i);
    }
    return "count=" + std::to_string(s.count) + " mean=" + std::to_string(static_cast<std::uint64_t>(s.mean_us())) +
           "us p50=" + std::to_string(s.quantile_us(0.5)) + "us p99=" + std::to_string(s.quantile_us(0.99)) +
           "us max<=" + std::to_string(max_bound) + "us";
}

void LatencyHistogram::record(std::chrono::nanoseconds elapsed) noexcept {
    const auto us = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count() < 0
            ? 0
            : std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count());
    buckets_[bucket_of(us)].fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(us, std::memory_order_relaxed);
}

HistogramSnapshot LatencyHistogram::snapshot() const noexcept {
    HistogramSnapshot s;
    for (std::size_t i = 0; i < kHistogramBuckets; ++i) {
        s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
        s.count += s.buckets[i];
    }
    s.sum_us = sum_us_.load(std::memory_order_relaxed);
    return s;
}

}  // namespace lockstep
