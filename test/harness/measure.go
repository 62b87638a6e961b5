package harness

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Quantile is the q-quantile (0..1) of sorted durations by nearest rank,
// 0 when there are none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// Percentiles formats the count, p50, p90, p99 and max of ds, rounded to
// the millisecond, for the measurements the TestBench* tests print.
func Percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Sorted(slices.Values(ds))
	parts := []string{fmt.Sprintf("n=%d", len(s))}
	for _, q := range []float64{0.50, 0.90, 0.99} {
		parts = append(parts, fmt.Sprintf("p%.0f=%v", q*100, Quantile(s, q).Round(time.Millisecond)))
	}
	parts = append(parts, fmt.Sprintf("max=%v", s[len(s)-1].Round(time.Millisecond)))
	return strings.Join(parts, " ")
}
